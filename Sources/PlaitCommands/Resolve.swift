import PlaitCore
import PlaitSync

/// Turns what a user typed (LIST: a title or an ID prefix; ITEM: an ID prefix of 4+ characters or the exact
/// text) into an object, or an error listing the candidates.
public enum Resolve {
    public static let minimumPrefix = 4

    /// The short form of an ID shown to users.
    public static func short(_ id: ObjectID) -> String { String(id.description.prefix(8)) }

    public static func list(_ query: String, in state: ListsState) throws -> ObjectID {
        let live = state.liveListIDs
        let describe = { (id: ObjectID) in "\(short(id)) '\(state.lists[id]!.title)'" }
        let exact = live.filter { state.lists[$0]!.title == query }
        if exact.count == 1 { return exact[0] }
        if exact.count > 1 { throw PlaitError.ambiguous(what: "list", query: query, candidates: exact.map(describe)) }
        let prefix = normalizedPrefix(query)
        if let prefix {
            let byID = live.filter { $0.description.hasPrefix(prefix) }
            if byID.count == 1 { return byID[0] }
            if byID.count > 1 { throw PlaitError.ambiguous(what: "list", query: query, candidates: byID.map(describe)) }
        }
        let folded = live.filter { state.lists[$0]!.title.lowercased() == query.lowercased() }
        if folded.count == 1 { return folded[0] }
        if folded.count > 1 { throw PlaitError.ambiguous(what: "list", query: query, candidates: folded.map(describe)) }
        throw PlaitError.notFound(
            what: "list", query: query, candidates: live.prefix(20).map(describe), total: live.count)
    }

    /// Resolves an item among live items (of `list` if given). When several match and exactly one of them
    /// satisfies `prefer` (say, the pending one for `done`), that one is taken.
    public static func item(
        _ query: String, in state: ListsState, list: ObjectID? = nil, prefer: ((ItemRecord) -> Bool)? = nil
    ) throws -> ObjectID {
        let scope = (list.map { [$0] } ?? state.liveListIDs).flatMap(state.liveItems(of:))
        let describe = { (id: ObjectID) -> String in
            let item = state.items[id]!
            return "\(short(id)) '\(item.text)' in \(state.lists[item.list]?.title ?? "?")"
        }
        if let full = try? ObjectID(parsing: query), let record = state.items[full], !record.deleted,
            list == nil || record.list == list
        {
            return full
        }
        var matches = scope.filter { state.items[$0]!.text == query }
        if let prefix = normalizedPrefix(query) {
            for id in scope where id.description.hasPrefix(prefix) && !matches.contains(id) { matches.append(id) }
        }
        if matches.count == 1 { return matches[0] }
        if matches.count > 1, let prefer {
            let preferred = matches.filter { prefer(state.items[$0]!) }
            if preferred.count == 1 { return preferred[0] }
        }
        if matches.count > 1 { throw PlaitError.ambiguous(what: "item", query: query, candidates: matches.map(describe)) }
        let lowered = query.lowercased()
        let typed = Array(lowered)
        let similar = scope.filter {
            let text = state.items[$0]!.text.lowercased()
            return text.contains(lowered) || isTypo(typed, of: text)
        }
        throw PlaitError.notFound(
            what: "item", query: query, candidates: similar.prefix(20).map(describe), total: scope.count,
            hint: elsewhere(query, in: state, list: list))
    }

    /// What `query`, which names no item where it was looked for, names instead (a new user's `rm Hardware`, a
    /// list; `move rice --after "call mum"` with that item in another list): one sentence, or nil.
    static func elsewhere(_ query: String, in state: ListsState, list: ObjectID?) -> String? {
        if let list {
            let others = state.liveListIDs.filter { $0 != list }.flatMap(state.liveItems(of:))
            if let found = others.first(where: { state.items[$0]!.text == query }) {
                let there = state.lists[state.items[found]!.list]?.title ?? "?"
                let here = state.lists[list]?.title ?? "?"
                return "'\(query.terminalExcerpt())' is in list '\(there.terminalExcerpt())', not '\(here.terminalExcerpt())'."
            }
        }
        let lowered = query.lowercased()
        if state.liveListIDs.contains(where: { state.lists[$0]!.title.lowercased() == lowered }) {
            return "'\(query.terminalExcerpt())' is a list: lists have commands of their own (`plait list rm`, "
                + "`plait list rename`, `plait list move`; `plait show LIST` shows its items)."
        }
        return nil
    }

    /// Whether `typed` is `text` with a typing slip (a new user's "mlk" for "milk"): at most one edit — a letter
    /// left out, added, changed, or two swapped — for up to 8 characters, two for longer ones; a text or query
    /// under 3 characters is no slip of anything.
    static func isTypo(_ typed: [Character], of text: String) -> Bool {
        let target = Array(text)
        let allowed = max(typed.count, target.count) > 8 ? 2 : 1
        guard min(typed.count, target.count) >= 3, abs(typed.count - target.count) <= allowed else { return false }
        // Optimal string alignment distance, rows of the dynamic programme kept three at a time.
        var before = [Int](), previous = Array(0...target.count), row = [Int](repeating: 0, count: target.count + 1)
        for i in 1...typed.count {
            row[0] = i
            for j in 1...target.count {
                let cost = typed[i - 1] == target[j - 1] ? 0 : 1
                row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, typed[i - 1] == target[j - 2], typed[i - 2] == target[j - 1] {
                    row[j] = min(row[j], before[j - 2] + 1)
                }
            }
            // No cell below the smaller of the last two rows' minima can follow (a swap reaches back two rows).
            guard min(row.min()!, previous.min()!) <= allowed else { return false }
            (before, previous, row) = (previous, row, before.isEmpty ? row : before)
        }
        return previous[target.count] <= allowed
    }

    /// An ID prefix: 4+ hexadecimal digits (dashes ignored), lower-cased; nil if the query is not one.
    static func normalizedPrefix(_ query: String) -> String? {
        let digits = query.lowercased().filter { $0 != "-" }
        guard digits.count >= minimumPrefix, digits.count <= 32, digits.allSatisfy({ $0.isHexDigit }) else { return nil }
        return digits
    }
}
