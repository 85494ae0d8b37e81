import SwiftProtobuf

/// The generated messages' protocol, named apart from PlaitWire's `Message` so test files need not import
/// SwiftProtobuf (whose own `Message` would make the name ambiguous).
typealias ProtoMessage = SwiftProtobuf.Message
