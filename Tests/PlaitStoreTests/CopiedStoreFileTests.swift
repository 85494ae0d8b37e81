import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// A store remembers the file it is written in (inode and the inode's birth time); at its first write from another
/// file — a copy, a backup put back by hand — its signed own timeline is left for a new one at the next edit
/// (`Store.noticeCopy`), so the copy never authors under numbers the original may have used.
///
/// Where the temporary directory's filesystem is not one whose inode numbers are trusted, nothing is looked for, and
/// these tests are skipped.
@Suite(.enabled(if: Store.fileIdentity(of: NSTemporaryDirectory()) != nil, "inode numbers not trusted here"))
struct CopiedStoreFileTests {
    /// `cp` of a store file with nothing writing it.
    private func copy(_ original: String, to path: String) throws {
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: original + suffix) {
            try FileManager.default.copyItem(atPath: original + suffix, toPath: path + suffix)
        }
    }

    private func addItem(_ replica: Replica, list: ObjectID, text: String) throws {
        try replica.edit { edit in
            _ = try edit.append(.itemCreate(id: .random(), list: list, text: text, at: .bottom))
        }
    }

    /// A signed home holding one list, and a copy of its store file, not opened yet.
    private func homeAndCopy(_ directory: TemporaryDirectory) throws -> (
        signer: P256Signer, list: ObjectID, original: String, timeline: TimelineID, copy: String
    ) {
        let signer = try ForkFixtures.signer("laptop")
        let list = ObjectID.random()
        let (original, timeline, _) = try ForkFixtures.home(in: directory, signer: signer, list: list)
        let copyPath = directory.file("copy.db")
        try copy(original, to: copyPath)
        return (signer, list, original, timeline, copyPath)
    }

    @Test func aCopyBeginsANewTimelineAndTheOriginalGoesOn() throws {
        try withTemporaryDirectory { directory in
            let (signer, list, original, timeline, copyPath) = try homeAndCopy(directory)

            let copied = try Replica(store: try Store.open(at: copyPath, synchronousFull: false), signer: signer)
            let noticed = Notices()
            copied.store.onCopyNoticed { noticed.add($0) }
            #expect(noticed.all.isEmpty, "opening writes nothing, and notices nothing")
            try addItem(copied, list: list, text: "on the copy")
            #expect(copied.store.copyNoticed)
            #expect(noticed.all == [Store.copyNotice], "said once")
            let new = try copied.store.ownTimeline()
            #expect(new != timeline)
            #expect(try copied.store.summary()[timeline] == 2, "nothing written on the old timeline")
            try addItem(copied, list: list, text: "again")
            #expect(try copied.store.ownTimeline() == new, "the next edit goes on on the new timeline")
            #expect(noticed.all.count == 1)

            // Opened again from its own file, the copy is not a copy any more.
            let reopened = try Replica(store: try Store.open(at: copyPath, synchronousFull: false), signer: signer)
            try addItem(reopened, list: list, text: "later")
            #expect(!reopened.store.copyNoticed)
            #expect(try reopened.store.ownTimeline() == new)

            let home = try Replica(store: try Store.open(at: original, synchronousFull: false), signer: signer)
            try addItem(home, list: list, text: "on the original")
            #expect(!home.store.copyNoticed)
            #expect(try home.store.ownTimeline() == timeline)
            #expect(try home.store.summary()[timeline] == 3)
        }
    }

    /// A store that never recorded its file (last written before this was kept, or its identity removed as a
    /// filesystem clone would keep it) is not taken for a copy: it records the file at its first write, and a copy
    /// of it made after that is noticed.
    @Test func aStoreThatRecordedNoFileRecordsItsOwn() throws {
        try withTemporaryDirectory { directory in
            let signer = try ForkFixtures.signer("laptop")
            let list = ObjectID.random()
            let (original, timeline, _) = try ForkFixtures.home(in: directory, signer: signer, list: list)
            try forgetStoreFile(storePath: original)
            let copyPath = directory.file("copy.db")
            try copy(original, to: copyPath)
            let copied = try Replica(store: try Store.open(at: copyPath, synchronousFull: false), signer: signer)
            try addItem(copied, list: list, text: "on the copy")
            #expect(!copied.store.copyNoticed)
            #expect(try copied.store.ownTimeline() == timeline)

            let second = directory.file("second.db")
            try copy(copyPath, to: second)
            let again = try Replica(store: try Store.open(at: second, synchronousFull: false), signer: signer)
            try addItem(again, list: list, text: "on the copy of the copy")
            #expect(again.store.copyNoticed)
            #expect(try again.store.ownTimeline() != timeline)
        }
    }

    /// An unsigned own timeline (a store from before signed timelines) is not moved: a peer's later changes of it
    /// stop authoring until `plait rejoin`, as before. The copy still records its file.
    @Test func anUnsignedCopyIsNotMarked() throws {
        try withTemporaryDirectory { directory in
            let original = directory.file("old.db")
            let timeline = TimelineID(42)
            do {
                let store = try Store.create(at: original, timeline: timeline, synchronousFull: false)
                try Replica(store: store).edit { edit in
                    _ = try edit.append(.listCreate(id: .random(), title: "L", color: nil, at: .bottom))
                }
            }
            let copyPath = directory.file("copy.db")
            try copy(original, to: copyPath)
            let copied = try Replica(store: try Store.open(at: copyPath, synchronousFull: false))
            try copied.edit { edit in
                _ = try edit.append(.listCreate(id: .random(), title: "M", color: nil, at: .bottom))
            }
            #expect(!copied.store.copyNoticed)
            #expect(try copied.store.ownTimeline() == timeline)
            let recorded = try copied.store.readers.read { db in try Meta.get(db, .storeFile) as String? }
            #expect(recorded == Store.fileIdentity(of: copyPath))
        }
    }

    /// Two processes opening the same copy at once: one notices it (the record is read again under the write
    /// lock), so the next edit begins one new timeline, not two.
    @Test func twoStoresOpeningOneCopyNoticeItOnce() throws {
        try withTemporaryDirectory { directory in
            let (signer, list, original, timeline, copyPath) = try homeAndCopy(directory)
            let stores = try (0..<2).map { _ in try Store.open(at: copyPath, synchronousFull: false) }
            try stores.forEach { try $0.openForWriting() }
            #expect(stores.filter(\.copyNoticed).count == 1)
            let replicas = try stores.map { try Replica(store: $0, signer: signer) }
            try addItem(replicas[0], list: list, text: "one")
            try addItem(replicas[1], list: list, text: "two")
            let summary = try stores[1].summary()
            #expect(summary.timelines.count == 2, "the old timeline and one new one: \(summary)")
            #expect(try stores[0].ownTimeline() == (try stores[1].ownTimeline()))
            #expect(try stores[0].ownTimeline() != timeline)
        }
    }

    /// One file, read with and without a birth time (a filesystem that gained it; a process whose `statx` gives
    /// none), is the same file; so is one whose inode number changed but not its birth time (overlayfs after a
    /// remount). Another birth time is another file, even under the same number (`rm -rf; cp -a` on ext4).
    @Test func identitiesNameOneFileByBirthTimeElseInode() {
        #expect(Store.sameFile("12@100.5", "12@100.5"))
        #expect(Store.sameFile("12@100.5", "12"))
        #expect(Store.sameFile("12", "12@100.5"))
        #expect(Store.sameFile("12@100.5", "13@100.5"), "overlayfs: the upper layer's number after a remount")
        #expect(!Store.sameFile("12@100.5", "12@100.6"), "the number reused for a new file")
        #expect(!Store.sameFile("12", "13"))
    }

    /// The identity is the inode and, where the filesystem keeps it, the inode's birth time; nothing on a
    /// filesystem whose inode numbers are made up (here procfs stands for them).
    @Test func theIdentityOfAFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory.file("file")
            #expect(FileManager.default.createFile(atPath: path, contents: Data([1])))
            var status = stat()
            #expect(stat(path, &status) == 0)
            let identity = try #require(Store.fileIdentity(of: path))
            #expect(identity.hasPrefix("\(status.st_ino)@") || identity == "\(status.st_ino)", "\(identity)")
            #expect(Store.fileIdentity(of: path) == identity, "the same file, the same identity")
            #expect(Store.fileIdentity(of: "/proc/self/status") == nil)
            #expect(Store.fileIdentity(of: directory.file("missing")) == nil)
        }
    }
}

private final class Notices: @unchecked Sendable {
    private let lock = NSLock()
    private var notices: [String] = []
    func add(_ notice: String) { lock.withLock { notices.append(notice) } }
    var all: [String] { lock.withLock { notices } }
}
