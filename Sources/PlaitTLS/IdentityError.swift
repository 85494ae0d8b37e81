/// What can go wrong reading a Device ID or creating, saving and loading a device identity.
public enum IdentityError: Error, Equatable, CustomStringConvertible {
    /// A digest handed to `DeviceID(digest:)` is not 32 bytes long.
    case invalidDigestLength(Int)
    /// A Device ID text has the wrong number of characters (dashes and spaces not counted).
    case deviceIDWrongLength(text: String, count: Int)
    /// A Device ID text contains a character outside A-Z and 2-7.
    case deviceIDInvalidCharacter(text: String, character: Character)
    /// The check character of a group (2, 4, 6 or 8) does not match the characters before it.
    case deviceIDCheckMismatch(text: String, group: Int)
    /// The check characters match but the last data character has bits no digest can produce.
    case deviceIDNotCanonical(text: String)
    /// The common name to put in a new certificate is empty or too long.
    case invalidCommonName(String)
    /// `Identity.create` found an identity file already there and left it alone.
    case fileExists(path: String)
    /// An identity file is missing.
    case fileMissing(path: String)
    /// An identity file exists but could not be read.
    case fileUnreadable(path: String, reason: String)
    /// An identity file could not be written.
    case fileUnwritable(path: String, reason: String)
    /// An identity file holds no PEM key or certificate OpenSSL can parse.
    case corruptFile(path: String, openSSLMessage: String)
    /// `key.pem` and `cert.pem` both parse but the key is not the certificate's.
    case keyDoesNotMatchCertificate(directory: String)
    /// An OpenSSL call failed while making or encoding an identity.
    case openSSL(operation: String, message: String)
    /// A succession statement (`plait rejoin --new-key`) was refused; nothing was trusted because of it.
    case succession(SuccessionProblem)

    public var description: String {
        switch self {
        case .invalidDigestLength(let count):
            return "a Device ID needs a 32-byte SHA-256 digest, not \(count) bytes; this is a bug in the caller."
        case .deviceIDWrongLength(let text, let count):
            return "\"\(text)\" is not a Device ID: it has \(count) characters instead of 56 "
                + "(not counting dashes); copy the whole ID shown by `plait id` on that device (or, for a paired "
                + "device, by `plait peers` here)."
        case .deviceIDInvalidCharacter(let text, let character):
            return "\"\(text)\" is not a Device ID: it contains \"\(character)\" but a Device ID has only "
                + "letters A-Z and digits 2-7; check for 0, 1, 8 or 9 typed instead of O, I, B or g."
        case .deviceIDCheckMismatch(let text, let group):
            return "\"\(text)\" is not a valid Device ID: the check character of group \(group) does not "
                + "match: the ID is mistyped; compare groups \(group - 1) and \(group) with `plait id` "
                + "on that device."
        case .deviceIDNotCanonical(let text):
            return "\"\(text)\" is not a valid Device ID: the second-to-last character of group 8 cannot "
                + "occur there: the ID is mistyped; compare it with `plait id` on that device."
        case .invalidCommonName(let name):
            return "\"\(name)\" cannot be a certificate's common name: use 1 to 64 characters."
        case .fileExists(let path):
            return "\(path) already exists and was left untouched; load that identity instead, "
                + "or move the file away if you really want a new one."
        case .fileMissing(let path):
            return "\(path) is missing; restore it from a backup; " + Self.newDeviceAdvice
        case .fileUnreadable(let path, let reason):
            return "could not read \(path) (\(reason)); check its permissions."
        case .fileUnwritable(let path, let reason):
            return "could not write \(path) (\(reason)); check the directory exists and is writable."
        case .corruptFile(let path, let message):
            return "\(path) is corrupt (OpenSSL: \(message)); restore it from a backup; " + Self.newDeviceAdvice
        case .keyDoesNotMatchCertificate(let directory):
            return "key.pem and cert.pem in \(directory) do not belong together; restore both from the same "
                + "backup; " + Self.newDeviceAdvice
        case .openSSL(let operation, let message):
            return "OpenSSL failed to \(operation) (\(message)); check the OpenSSL 3 installation."
        case .succession(let problem):
            return "the succession statement was refused: \(problem); the device keeps its old trust only."
        }
    }

    /// The way on when a home's identity is lost. (`plait init` refuses a home that holds a store, so it cannot
    /// make a new identity in place; the lists there still show, and what was synced is on the paired devices.)
    static let newDeviceAdvice = "failing that, create a new device in another home (`plait init --home DIR`) and "
        + "pair it again (the Device ID changes); the lists here still show, and paired devices hold what was synced."
}
