import Foundation
import PlaitSync

#if canImport(Glibc)
import Glibc
#endif

/// Files of the home only this user may read (the password's hash, the page's sessions).
enum PrivateFile {
    /// Replaces `path` with `bytes`, mode 0600: a new file beside it, written in full and synced, then renamed over
    /// it and the directory synced, so a crash leaves either the old content or the new one, never part of it.
    static func replace(_ path: String, with bytes: [UInt8]) throws {
        var generator = SystemRandomNumberGenerator()
        let temporary = path + ".tmp-" + String(generator.next(), radix: 36)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw PlaitError.file(path: path, problem: "cannot be written (\(String(cString: strerror(errno))))")
        }
        let written = write(descriptor, bytes, bytes.count) == bytes.count && fsync(descriptor) == 0
        close(descriptor)
        guard written, rename(temporary, path) == 0 else {
            let error = PlaitError.file(path: path, problem: "cannot be written (\(String(cString: strerror(errno))))")
            unlink(temporary)
            throw error
        }
        // The rename itself is durable once the directory is synced.
        let directory = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }
}
