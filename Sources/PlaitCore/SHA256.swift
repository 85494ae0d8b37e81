import Synchronization

/// An incremental SHA-256: the digest of bytes fed in pieces, in order (a whole state's encoding, never held at
/// once). `finalize` is called once, last.
public protocol SHA256Stream: AnyObject {
    func update(_ bytes: UnsafeRawBufferPointer)
    func finalize() -> [UInt8]
}

/// SHA-256 (FIPS 180-4). Core keeps no dependency, so it carries a pure-Swift implementation (the reference,
/// about 10× slower than OpenSSL's); a faster one is injected with `install` (PlaitStore installs OpenSSL's
/// before it opens a store) and every hash of Core then goes through it.
public struct SHA256: Sendable {
    /// A one-shot SHA-256 over contiguous bytes.
    public typealias Function = @Sendable (UnsafeRawBufferPointer) -> [UInt8]

    /// A new incremental SHA-256, for bytes that come in pieces.
    public typealias StreamFunction = @Sendable () -> any SHA256Stream

    /// Written once, under `installState`: 0 nothing installed, 1 being installed, 2 installed.
    nonisolated(unsafe) private static var installed: Function?
    nonisolated(unsafe) private static var installedStream: StreamFunction?
    private static let installState = Atomic<Int>(0)

    /// Makes `function` the SHA-256 of `hash` (and so of every change hash, chain check and state digest).
    /// The first installation wins and later ones are ignored: a process has one fast SHA-256. It must compute
    /// SHA-256 exactly: tests compare it with `reference` on random inputs. `stream`, its incremental form,
    /// serves `stream()` (the state digest); without it the reference hashes what comes in pieces.
    public static func install(_ function: @escaping Function, stream: StreamFunction? = nil) {
        guard installState.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged else { return }
        installed = function
        installedStream = stream
        installState.store(2, ordering: .releasing)
    }

    /// A new incremental SHA-256: the installed one, or the reference.
    public static func stream() -> any SHA256Stream {
        if installState.load(ordering: .acquiring) == 2, let installedStream { return installedStream() }
        return ReferenceStream()
    }

    /// The pure-Swift SHA-256 fed in pieces.
    public final class ReferenceStream: SHA256Stream {
        private var hasher = SHA256()

        public init() {}

        public func update(_ bytes: UnsafeRawBufferPointer) { hasher.update(Array(bytes)) }

        public func finalize() -> [UInt8] { hasher.finalize() }
    }

    /// The installed implementation, or the reference when none is (yet).
    public static var current: Function {
        if installState.load(ordering: .acquiring) == 2, let installed { return installed }
        return { bytes in reference(bytes) }
    }

    /// The pure-Swift implementation, whatever is installed.
    public static func reference(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(Array(bytes))
        return hasher.finalize()
    }

    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
    )
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    public init() { buffer.reserveCapacity(64) }

    /// Hashes `bytes` in one call, with the installed implementation.
    public static func hash<S: Sequence>(_ bytes: S) -> [UInt8] where S.Element == UInt8 {
        let function = current
        if let result = bytes.withContiguousStorageIfAvailable({ function(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { function($0) }
    }

    public mutating func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 { update(Array(bytes)) }

    public mutating func update(_ bytes: [UInt8]) {
        length &+= UInt64(bytes.count)
        bytes.withUnsafeBytes { input in
            var index = 0
            if !buffer.isEmpty {
                let take = min(64 - buffer.count, input.count)
                buffer.append(contentsOf: input[0..<take])
                index = take
                if buffer.count == 64 {
                    let block = buffer
                    block.withUnsafeBytes { compress($0) }
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            while input.count - index >= 64 {
                compress(UnsafeRawBufferPointer(rebasing: input[index..<index + 64]))
                index += 64
            }
            buffer.append(contentsOf: input[index...])
        }
    }

    public mutating func update(_ string: String) { update(Array(string.utf8)) }

    public mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8
        var tail: [UInt8] = [0x80]
        let used = (buffer.count + 1) % 64
        let pad = used <= 56 ? 56 - used : 120 - used
        tail.append(contentsOf: repeatElement(0, count: pad))
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        let blocks = buffer + tail
        for offset in stride(from: 0, to: blocks.count, by: 64) {
            blocks.withUnsafeBytes { all in compress(UnsafeRawBufferPointer(rebasing: all[offset..<offset + 64])) }
        }
        buffer.removeAll(keepingCapacity: true)
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7] {
            out.append(UInt8(truncatingIfNeeded: word >> 24))
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            out.append(UInt8(truncatingIfNeeded: word >> 8))
            out.append(UInt8(truncatingIfNeeded: word))
        }
        return out
    }

    @inline(__always) private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    private mutating func compress(_ block: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            compress(block, schedule: w)
        }
    }

    private mutating func compress(_ block: UnsafeRawBufferPointer, schedule w: UnsafeMutableBufferPointer<UInt32>) {
        for i in 0..<16 {
            w[i] = UInt32(block[i * 4]) << 24 | UInt32(block[i * 4 + 1]) << 16
                | UInt32(block[i * 4 + 2]) << 8 | UInt32(block[i * 4 + 3])
        }
        for i in 16..<64 {
            let s0 = Self.rotr(w[i - 15], 7) ^ Self.rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = Self.rotr(w[i - 2], 17) ^ Self.rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, hh) = h
        for i in 0..<64 {
            let s1 = Self.rotr(e, 6) ^ Self.rotr(e, 11) ^ Self.rotr(e, 25)
            let ch = (e & f) ^ (~e & g)
            let t1 = hh &+ s1 &+ ch &+ Self.k.withUnsafeBufferPointer { $0[i] } &+ w[i]
            let s0 = Self.rotr(a, 2) ^ Self.rotr(a, 13) ^ Self.rotr(a, 22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            hh = g
            g = f
            f = e
            e = d &+ t1
            d = c
            c = b
            b = a
            a = t1 &+ t2
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e, h.5 &+ f, h.6 &+ g, h.7 &+ hh)
    }
}

extension Array where Element == UInt8 {
    /// Decodes hexadecimal text (either case, two digits a byte); nil for anything else.
    public init?(hexString text: String) {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }

    /// Lowercase hexadecimal.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
