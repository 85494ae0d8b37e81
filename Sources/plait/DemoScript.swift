import Foundation
import PlaitCore
import PlaitSync

/// The edits one device makes in `plait demo`: a seeded mix of everything the lists domain does, each
/// chosen against the device's state at that moment, so it works on whatever has arrived from the others.
///
/// Device 1 creates the shared list, Groceries, whose ID every device derives from the seed; every device
/// creates a list of its own and adds to the others' lists once they arrived. Then a weighted mix: adds
/// (at the bottom, the top, or after another item), completes, reopens, edits, moves within a list and to
/// another list, item deletes, list renames, recolors, moves and a few new lists. At edit `meeting`
/// (halfway) device 2 deletes Groceries while every other device adds an item to it: whoever runs the
/// scripts lets the devices make that edit at the same moment, so the adds are concurrent with the delete,
/// survive it and keep the list alive (DESIGN §2: data is never lost).
///
/// The seed fixes each device's sequence of random draws, not the outcome: which items the draws land on
/// depends on what has arrived, which depends on timing.
public struct DemoScript: Sendable {
    /// 0-based: device 0 creates the shared list, device 1 deletes it halfway.
    public let device: Int
    public let deviceName: String
    /// How many edits this device makes.
    public let edits: Int
    /// Groceries, created by device 0 and known to every device by its ID.
    public let sharedList: ObjectID
    /// The list this device creates first.
    public let ownList: ObjectID

    private var random: SplitMix64
    private var listsCreated = 0
    private var sharedListDeleted = false

    public static let sharedListTitle = "Groceries"

    static let words = [
        "milk", "eggs", "bread", "butter", "apples", "coffee", "rice", "lemons", "cheese", "tomatoes",
        "call the plumber", "water the plants", "book tickets", "pay rent", "fix the bike", "return library books",
        "buy a gift", "renew passport", "clean the oven", "back up photos", "oil the hinges", "plan the trip",
    ]
    static let details = ["x2", "the good one", "urgent", "on sale", "organic", "before Friday", "large", "ask Sam"]
    static let titles = ["Errands", "Garden", "Books to read", "Weekend", "Work", "Gifts", "Hardware store"]
    static let colors = ["red", "orange", "yellow", "green", "blue", "purple"]

    /// `seed` is the run's seed: every device derives the shared list's ID from it, and its own draws from
    /// it and its number.
    public init(device: Int, name: String, edits: Int, seed: UInt64) {
        self.device = device
        deviceName = name
        self.edits = edits
        var shared = SplitMix64(seed: seed ^ 0x5EED_0FD0_6A11)
        sharedList = ObjectID.random(using: &shared)
        random = SplitMix64(seed: seed &+ UInt64(device + 1) &* 0x9E37_79B9_7F4A_7C15)
        ownList = ObjectID.random(using: &random)
    }

    /// The edit (from 0) that every device makes at the same moment: the delete of Groceries and the adds to it.
    public var meeting: Int { edits / 2 }

    /// The title of this device's own list.
    public var ownListTitle: String { "\(deviceName)'s to-do" }

    /// The change for edit number `index` (from 0), chosen against `state`: this device's state now, with
    /// whatever has arrived from the others. `delete` makes the list delete this author would make now (it
    /// observes what the author has seen); it is called only for a delete.
    public mutating func change(
        at index: Int, in state: ListsState, delete: (ObjectID) throws -> ListsChange
    ) rethrows -> ListsChange {
        if device == 0 && index == 0 {
            return .listCreate(id: sharedList, title: Self.sharedListTitle, color: "green", at: .top)
        }
        if index == (device == 0 ? 1 : 0) {
            return .listCreate(id: ownList, title: ownListTitle, color: nil, at: .bottom)
        }
        // The delete waits for the list to arrive if it has not by the meeting.
        if device == 1 && !sharedListDeleted && index >= meeting && state.lists[sharedList]?.deleted == false {
            sharedListDeleted = true
            return try delete(sharedList)
        }
        if device != 1 && index == meeting && state.lists[sharedList]?.deleted == false {
            let text = pick(Self.words) + " (" + deviceName + ")"
            return .itemCreate(id: ObjectID.random(using: &random), list: sharedList, text: text, at: .bottom)
        }
        return randomChange(in: state)
    }

    /// One draw of the mix; an edit that the state does not allow (nothing to complete yet) becomes an add.
    private mutating func randomChange(in state: ListsState) -> ListsChange {
        let lists = state.liveListIDs
        let pending = lists.flatMap { state.itemIDs(in: $0, completed: false) }
        let completed = lists.flatMap { state.itemIDs(in: $0, completed: true) }
        let roll = Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<14 where !pending.isEmpty:
            return .itemComplete(id: pick(pending))
        case 14..<18 where !completed.isEmpty:
            return .itemReopen(id: pick(completed))
        case 18..<32 where !(pending + completed).isEmpty:
            let id = pick(pending + completed)
            return .itemEdit(id: id, text: pick(Self.words) + ", " + pick(Self.details))
        case 32..<42 where !pending.isEmpty:
            let id = pick(pending)
            let home = state.items[id]!.list
            let others = lists.filter { $0 != home }
            let neighbours = state.itemIDs(in: home, completed: false).filter { $0 != id }
            switch Int.random(in: 0..<4, using: &random) {
            case 0 where !others.isEmpty: return .itemMove(id: id, list: pick(others), at: .bottom)
            case 1 where !neighbours.isEmpty: return .itemMove(id: id, list: nil, at: .after(pick(neighbours)))
            default: return .itemMove(id: id, list: nil, at: .top)
            }
        case 42..<50 where !(pending + completed).isEmpty:
            return .itemDelete(id: pick(pending + completed))
        case 50..<54 where !lists.isEmpty:
            let id = pick(lists)
            let title = id == sharedList ? pick([Self.sharedListTitle, "Shopping", "Groceries for Saturday"])
                : id == ownList ? pick([ownListTitle, "\(deviceName)'s tasks"]) : pick(Self.titles)
            return .listRename(id: id, title: title)
        case 54..<58 where !lists.isEmpty:
            return .listRecolor(id: pick(lists), color: pick(Self.colors))
        case 58..<61 where lists.count > 1:
            let id = pick(lists)
            let anchors = lists.filter { $0 != id }
            return .listMove(id: id, at: random.chance(50) ? .top : .after(pick(anchors)))
        case 61..<63 where listsCreated < 2:
            listsCreated += 1
            return .listCreate(
                id: ObjectID.random(using: &random), title: pick(Self.titles), color: pick(Self.colors), at: .bottom)
        default:
            return add(in: state, lists: lists)
        }
    }

    /// An item added to the shared list, the own list or any other live one: mostly at the bottom.
    private mutating func add(in state: ListsState, lists: [ObjectID]) -> ListsChange {
        let text = random.chance(30) ? pick(Self.words) + " (" + deviceName + ")" : pick(Self.words)
        var target: ObjectID
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<4 where lists.contains(sharedList): target = sharedList
        case 4..<7 where lists.contains(ownList): target = ownList
        default: target = lists.isEmpty ? ownList : pick(lists)
        }
        // Before its own list is live (deleted by nobody, but maybe not created if index 0 was skipped) any
        // target works: adding to an unknown list makes a "Recovered" one, which is fine too.
        if !lists.contains(target), let first = lists.first { target = first }
        let pendingHere = state.itemIDs(in: target, completed: false)
        let position: Position
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<15: position = .top
        case 15..<30 where !pendingHere.isEmpty: position = .after(pick(pendingHere))
        default: position = .bottom
        }
        return .itemCreate(id: ObjectID.random(using: &random), list: target, text: text, at: position)
    }

    private mutating func pick<T>(_ choices: [T]) -> T {
        choices[Int.random(in: 0..<choices.count, using: &random)]
    }
}
