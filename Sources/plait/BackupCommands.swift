import ArgumentParser
import Foundation
import PlaitAPI
import PlaitOutput
import PlaitSync

/// The files of the local API that a backup keeps with the home (the page's password hash and the API token), and
/// the one a restore moves aside without putting back (the signed-in page sessions of the replaced home).
enum BackedUpAPIFiles {
    static let kept = [APIPassword.fileName, APIAuth.tokenFileName]
    static let dropped = [APIAuth.sessionsFileName]
}

extension Plait {
    struct Backup: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Copy this device's home to a directory: the store as one moment, the key and certificate.",
            discussion: """
                Safe while the agent runs and while other commands write: the store is copied as one read \
                transaction sees it (SQLite's VACUUM INTO), so the copy is never torn between plait.db and its \
                -wal, as a file copy of the home can be. DIR must not exist or be empty; the backup holds \
                plait.db, key.pem, cert.pem, retired/ (keys `rejoin --new-key` replaced) and the local API's \
                password hash and token. The key is secret: keep the backup as private as the home. The config \
                file is not in the home and not copied. Put a backup back with `plait restore DIR`.
                """)

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The directory to write the backup to (new, or empty).")
        var directory: String

        @Flag(help: "Print the result as JSON.")
        var json = false

        func run() throws {
            let home = try global.openHome()
            let report = try home.backup(to: directory, also: BackedUpAPIFiles.kept)
            if json {
                try printJSON(
                    BackupOutput(
                        changes: report.changes, device: report.deviceID, files: report.files,
                        identityProblem: report.identityProblem, path: report.path,
                        summary: report.summary.description))
                return
            }
            if let problem = report.identityProblem {
                FileHandle.standardError.write(Data(("warning: this home's identity cannot be read (\(problem.terminalSafe)); "
                    + "the store and the files that are there were backed up all the same, but `plait restore` needs "
                    + "a key.pem and cert.pem that belong together\n").utf8))
            }
            print("backed up \(report.deviceID.map { "device \($0)" } ?? "this device") to \(report.path.terminalSafe)")
            print("  \(report.changes) changes (summary \(report.summary)); files: "
                + report.files.joined(separator: ", "))
            print("It holds this device's private key: keep it as private as the home. `plait restore "
                + "\(report.path.terminalSafe)` puts it back.")
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore",
            abstract: "Put a backup made by `plait backup` back in place as this device's home.",
            discussion: """
                Stop the agent first: restore refuses while one runs on the home (copying files over the store \
                of a running agent is not seen by it, which writes on from what it had read). Let no other plait \
                command run on the home meanwhile either: one that opened the store before the restore writes \
                into the replaced store. The backup must \
                be of this device (the same Device ID) and its store must pass SQLite's integrity check; nothing \
                is changed otherwise. The files it replaces are moved to replaced-by-restore-TIME/ in the home, \
                never deleted (move that directory out of the home to restore from it). A home that does not \
                exist yet is made. A restore cut off (killed, power lost) is finished by running it again.

                Then start the agent or run `plait sync`: what this device had synced to its peers since the \
                backup comes back from them. What it wrote after the backup and never synced is not in the \
                backup (the replaced store, kept aside, still holds it). The next edit begins a new timeline, \
                as the old one may have gone on after the backup (for a store from before signed timelines, \
                run `plait rejoin` instead if the sync says a peer holds more of it). Changes of the backup that a peer has since \
                folded into its baseline and that this device cannot show it folds are kept aside, and items \
                they alone made are made again (see "When things go wrong" in the README).
                """)

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The backup's directory (made by `plait backup`).")
        var directory: String

        @Flag(help: "Print the result as JSON.")
        var json = false

        func run() throws {
            let report = try Home.restore(
                from: directory, to: global.homePath, also: BackedUpAPIFiles.kept, dropped: BackedUpAPIFiles.dropped)
            if json {
                try printJSON(
                    RestoreOutput(
                        changes: report.changes, device: report.deviceID, home: report.home,
                        newTimeline: report.newTimelineAtNextEdit, replaced: report.replaced,
                        replacedPath: report.replacedPath, summary: report.summary.description))
                return
            }
            print("restored device \(report.deviceID) in \(report.home.terminalSafe)")
            print("  \(report.changes) changes (summary \(report.summary))")
            if let aside = report.replacedPath {
                print("  the files it replaced (\(report.replaced.joined(separator: ", "))) are in "
                    + "\(aside.terminalSafe)")
            }
            print("Start the agent or run `plait sync`: what this device synced since the backup comes back from its "
                + "peers.")
            if report.newTimelineAtNextEdit {
                print("The next edit begins a new timeline: the old one may have gone on after the backup, on the "
                    + "peers.")
            } else {
                print("This store's timeline is from before signed timelines: if the sync says a peer holds more of "
                    + "it, run `plait rejoin` before editing.")
            }
        }
    }
}
