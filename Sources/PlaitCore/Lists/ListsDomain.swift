/// The lists domain: ordered lists of items with pending and completed sections (DESIGN §2).
public struct ListsDomain: Domain {
    public typealias State = ListsState

    public static let name = "lists"
    /// The newest change version interpreted (`list.delete` version 2; every other kind is at 1).
    public static let version: UInt32 = 2
    /// The title of a list created because an item arrived for a list this device never heard of.
    public static let recoveredTitle = "Recovered"

    /// Where a `list.delete`'s observed chains stand here: bound to the store while it replays.
    public let chains: ChainLookup

    public init(chains: ChainLookup = ChainLookup()) { self.chains = chains }

    public func emptyState() -> ListsState { ListsState() }

    public func canInterpret(kind: String, version: UInt32) -> Bool {
        version >= 1 && ListsChange.kinds.contains(kind) && version <= ListsChange.newestVersion(of: kind)
    }

    public func apply(_ change: Change, to state: inout ListsState) -> ApplyOutcome {
        guard canInterpret(kind: change.kind, version: change.version) else {
            return Change.isEngineKind(change.kind) ? .noop : .uninterpretable
        }
        // A known kind whose payload does not decode is a no-op on every device of this version.
        guard let decoded = try? ListsChange(kind: change.kind, version: change.version, payload: change.payload)
        else { return .noop }
        return apply(decoded, ref: change.ref, key: change.orderKey, to: &state)
    }

    /// A record with its dictionary slot and key, and its text: measured at about 200 bytes an item.
    public func approximateSize(of state: ListsState) -> Int { (state.items.count + state.lists.count) * 200 }

    public func decode(_ change: Change) throws(CoreError) -> ListsChange? {
        guard canInterpret(kind: change.kind, version: change.version) else { return nil }
        return try ListsChange(kind: change.kind, version: change.version, payload: change.payload)
    }

    public func apply(_ operation: ListsChange?, of change: Change, to state: inout ListsState) -> ApplyOutcome {
        guard let operation else { return apply(change, to: &state) }
        return apply(operation, ref: change.ref, key: change.orderKey, to: &state)
    }

    public func apply(_ change: ListsChange, ref: ChangeRef, key: OrderKey, to state: inout ListsState)
        -> ApplyOutcome
    {
        let outcome = applyOnce(change, ref: ref, key: key, to: &state)
        // Every change addressed to an existing object raises its stamp, no-ops included: an object's stamp is
        // then the largest key among the changes a history holds for it, so a baseline whose history covers
        // another's never holds an older version of any object, and the per-object join picks the larger.
        // (Applied changes raised it already.)
        guard outcome == .noop else { return outcome }
        switch change {
        case let .listCreate(id, _, _, _), let .listRename(id, _), let .listRecolor(id, _), let .listMove(id, _),
            let .listDelete(id, _, _):
            if let stamp = state.lists[id]?.stamp, stamp < key {
                state.lists[id]!.stamp = key
                state.touchList(id)
            }
        case let .itemCreate(id, _, _, _), let .itemEdit(id, _), let .itemComplete(id), let .itemReopen(id),
            let .itemMove(id, _, _), let .itemDelete(id):
            if let stamp = state.items[id]?.stamp, stamp < key {
                state.items[id]!.stamp = key
                state.touchItem(id)
            }
        }
        return outcome
    }

    private func applyOnce(_ change: ListsChange, ref: ChangeRef, key: OrderKey, to state: inout ListsState)
        -> ApplyOutcome
    {
        switch change {
        case let .listCreate(id, title, color, at):
            guard state.lists[id] == nil else { return .noop }
            state.lists[id] = ListRecord(title: title, color: color, deleted: false, stamp: key)
            state.linkList(id, at: at)
        case let .listRename(id, title):
            guard state.lists[id]?.deleted == false else { return .noop }
            state.lists[id]!.title = title
            state.lists[id]!.stamp = max(state.lists[id]!.stamp, key)
            state.touchList(id)
        case let .listRecolor(id, color):
            guard state.lists[id]?.deleted == false else { return .noop }
            state.lists[id]!.color = color
            state.lists[id]!.stamp = max(state.lists[id]!.stamp, key)
            state.touchList(id)
        case let .listMove(id, at):
            guard state.lists[id]?.deleted == false else { return .noop }
            if case let .after(anchor) = at, anchor == id { return .noop }
            state.unlinkList(id)
            state.lists[id]!.stamp = max(state.lists[id]!.stamp, key)
            state.linkList(id, at: at)
        case let .listDelete(id, summary, heads):
            guard state.lists[id]?.deleted == false else { return .noop }
            let observed = chains.coverage(observed: summary, heads: heads)
            var survivors = 0
            for item in state.liveItems(of: id) {
                if observed.contains(state.items[item]!.placedBy) {
                    deleteItem(item, key: key, in: &state)
                } else {
                    survivors += 1
                }
            }
            // Items placed concurrently survive, and so does their list: data is never lost.
            if survivors == 0 { state.lists[id]!.deleted = true }
            state.lists[id]!.stamp = max(state.lists[id]!.stamp, key)
            state.touchList(id)
        case let .itemCreate(id, list, text, at):
            guard state.items[id] == nil else { return .noop }
            ensureLiveList(list, key: key, in: &state)
            state.items[id] = ItemRecord(
                list: list, text: text, completed: false, deleted: false, placedBy: ref, stamp: key)
            state.linkItem(id, at: at)
        case let .itemEdit(id, text):
            guard state.items[id]?.deleted == false else { return .noop }
            state.items[id]!.text = text
            state.items[id]!.stamp = max(state.items[id]!.stamp, key)
            state.touchItem(id)
        case let .itemComplete(id):
            guard let record = state.items[id], !record.deleted, !record.completed else { return .noop }
            state.unlinkItem(id)
            state.items[id]!.completed = true
            state.items[id]!.stamp = max(state.items[id]!.stamp, key)
            // The top of completed at replay time, not a stored index.
            state.linkItem(id, at: .top)
        case let .itemReopen(id):
            guard let record = state.items[id], !record.deleted, record.completed else { return .noop }
            state.unlinkItem(id)
            state.items[id]!.completed = false
            state.items[id]!.stamp = max(state.items[id]!.stamp, key)
            state.linkItem(id, at: .bottom)
        case let .itemMove(id, list, at):
            guard let record = state.items[id], !record.deleted else { return .noop }
            let target = list ?? record.list
            guard state.lists[target] != nil else { return .noop }
            if case let .after(anchor) = at, anchor == id { return .noop }
            state.unlinkItem(id)
            if target != record.list {
                ensureLiveList(target, key: key, in: &state)
                state.items[id]!.list = target
                state.items[id]!.placedBy = ref
            }
            state.items[id]!.stamp = max(state.items[id]!.stamp, key)
            state.linkItem(id, at: at)
        case let .itemDelete(id):
            guard state.items[id]?.deleted == false else { return .noop }
            deleteItem(id, key: key, in: &state)
        }
        return .applied
    }

    private func deleteItem(_ id: ObjectID, key: OrderKey, in state: inout ListsState) {
        state.unlinkItem(id)
        state.items[id]!.deleted = true
        state.items[id]!.stamp = max(state.items[id]!.stamp, key)
        state.touchItem(id)
    }

    /// A deleted list is revived with its last title and color; an unknown one is created as "Recovered".
    private func ensureLiveList(_ list: ObjectID, key: OrderKey, in state: inout ListsState) {
        if let record = state.lists[list] {
            if record.deleted {
                state.lists[list]!.deleted = false
                state.lists[list]!.stamp = max(state.lists[list]!.stamp, key)
                state.touchList(list)
            }
        } else {
            state.lists[list] = ListRecord(title: Self.recoveredTitle, color: nil, deleted: false, stamp: key)
            state.linkList(list, at: .bottom)
        }
    }
}
