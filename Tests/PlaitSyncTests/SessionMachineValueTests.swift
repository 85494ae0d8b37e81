import PlaitCore
@testable import PlaitStore
@testable import PlaitSession
import PlaitWire
import Testing

/// The session protocol over plain values: messages and the store's answers in, actions out. No store, no
/// socket: each test plays the owner's part by hand, so it sees every read, write and message in order.
@Suite struct SessionMachineValueTests {
    // MARK: Greeting

    /// Hello is built from one status read: the summary, heads, baseline and digest of the same instant.
    @Test func helloComesFromOneStatusRead() throws {
        var machine = SessionMachine(identity: Self.me, options: SessionOptions())
        let first = machine.start()
        #expect(first.count == 1)
        guard case .readStatus = first.first else { Issue.record("start did not read the status: \(first)"); return }
        let status = Self.status(summary: [Self.mine: 5, Self.theirs: 2], digest: [7, 7], unknown: 3)
        let actions = try machine.answered(.status(status))
        let hello = try #require(Self.sent(actions).first.flatMap(Self.helloOf))
        #expect(hello.deviceID == Self.me.deviceID && hello.name == Self.me.name)
        #expect(hello.summary == status.summary)
        #expect(hello.headHashes[Self.mine] == HeadHash(seq: 5, hash: Self.hash(Self.mine, 5)))
        #expect(hello.stateDigest == [7, 7] && hello.unknownCount == 3)
        #expect(hello.maxFrameSize == SessionOptions().frameLimit)
        #expect(Self.sent(actions).count == 1 && !machine.isWaiting)
    }

    /// The peer's Hello is answered with a Want carrying this device's summary; equal heads are compared from
    /// the local view, lower ones by looking their hashes up; then the two states are compared.
    @Test func helloIsAnsweredWithWantAndComparesStates() throws {
        var machine = Self.machine()
        let local = Self.status(summary: [Self.mine: 4, Self.theirs: 6], digest: [1])
        let hello = Self.hello(summary: [Self.mine: 4, Self.theirs: 3], digest: [1])
        var actions = try machine.received(.hello(hello))
        guard case let .readGreeting(peer) = actions.last, peer == Self.peerID else {
            Issue.record("Hello did not read the greeting: \(actions)")
            return
        }
        actions = try machine.answered(.greeting(staged: nil, view: local.view, quarantined: []))
        // The peer's head of `theirs` (3) is below this device's (6): its hash is looked up.
        guard case let .lookUpHashes(refs) = actions.last else { Issue.record("no hash look-up: \(actions)"); return }
        #expect(refs == [ChangeRef(timeline: Self.theirs, seq: 3)])
        actions = try machine.answered(.hashes([refs[0]: Self.hash(Self.theirs, 3)]))
        #expect(Self.forkRecords(actions) == [[]], "the forks of the last session are cleared")
        #expect(Self.findingRecords(actions).count == 1)
        guard case .readSummary = actions.last else { Issue.record("the Want read no summary: \(actions)"); return }
        actions = try machine.answered(.summary(local.summary))
        #expect(Self.sent(actions) == [.want(Want(have: local.summary, baselineOffset: nil))])
        // The Hello's report at a different summary: compared no further than the summary.
        guard case .readSummary = actions.last else { Issue.record("no comparison: \(actions)"); return }
        actions = try machine.answered(.summary(local.summary))
        #expect(actions.isEmpty && !machine.isWaiting && !machine.verifiedEqual)
    }

    /// At equal summaries the Hello's state digest is compared with this device's: equal verifies them.
    @Test func helloAtEqualSummaryVerifiesTheStates() throws {
        var machine = Self.machine()
        let summary: Summary = [Self.mine: 2, Self.theirs: 2]
        let local = Self.status(summary: summary, digest: [9, 9])
        var actions = try Self.greet(
            &machine, hello: Self.hello(summary: summary, digest: [9, 9]), local: local, stopAtStatus: true)
        guard case .readStatus = actions.last else { Issue.record("no status read: \(actions)"); return }
        actions = try machine.answered(.status(local))
        #expect(actions.isEmpty)
        #expect(machine.verifiedEqual && machine.divergence == nil)
    }

    /// Fork records travel in Hello (PROTOCOL.md §22.9): this device's Hello carries the records its view holds, and
    /// a peer's records are learnt before the greeting is read, so heads are compared under the names they give.
    @Test func forkRecordsTravelInHelloAndAreLearntBeforeTheGreeting() throws {
        let record = ForkBranch.Record(
            branch: ForkBranch.id(parent: Self.theirs, firstHash: [UInt8](repeating: 9, count: 32)), root: Self.theirs,
            parent: Self.theirs, base: 2, firstHash: [UInt8](repeating: 9, count: 32),
            rivalHash: [UInt8](repeating: 1, count: 32))
        var sender = SessionMachine(identity: Self.me, options: SessionOptions())
        _ = sender.start()
        var status = Self.status(summary: [Self.mine: 5, Self.theirs: 2])
        status.view.forkRecords = [record]
        let hello = try #require(Self.sent(try sender.answered(.status(status))).first.flatMap(Self.helloOf))
        #expect(hello.forkRecords == [record])

        var receiver = Self.machine()
        var peerHello = Self.hello(summary: [Self.theirs: 2])
        peerHello.forkRecords = [record]
        let actions = try receiver.received(.hello(peerHello))
        let learnt = actions.firstIndex { if case let .learnForkRecords(records) = $0 { records == [record] } else { false } }
        let read = actions.firstIndex { if case .readGreeting = $0 { true } else { false } }
        #expect(learnt != nil && read != nil && learnt! < read!, "records are learnt, then the greeting read: \(actions)")

        // A Hello without records learns nothing.
        var plain = Self.machine()
        #expect(!(try plain.received(.hello(Self.hello(summary: [Self.theirs: 2])))).contains {
            if case .learnForkRecords = $0 { true } else { false }
        })
    }

    /// A Hello whose Device ID is not the one the certificate proved ends the session before anything is read.
    @Test func certifiedPeerIDMismatchIsRefused() throws {
        var options = SessionOptions()
        options.certifiedPeerID = "CERTIFIED"
        var machine = SessionMachine(identity: Self.me, options: options)
        #expect {
            _ = try machine.received(.hello(Self.hello(summary: [:])))
        } throws: { error in
            guard case let .identityMismatch(claimed, certified) = error as? SessionError else { return false }
            return claimed == Self.peerID && certified == "CERTIFIED"
        }
        #expect(machine.peer == nil && !machine.isWaiting)
    }

    /// Out of turn and incompatible greetings: each a typed error, none reading the store.
    @Test func greetingsOutOfTurnOrIncompatibleAreRefused() throws {
        var machine = Self.machine()
        #expect(Self.violation { _ = try machine.received(.want(Want(have: [:], baselineOffset: nil))) })
        var own = Self.hello(summary: [:])
        own.deviceID = Self.me.deviceID
        #expect(Self.incompatible { _ = try machine.received(.hello(own)) })
        var other = Self.hello(summary: [:])
        other.domainName = "notes"
        #expect(Self.incompatible { _ = try machine.received(.hello(other)) })
        var newer = Self.hello(summary: [:])
        newer.protocolVersion = Hello.currentProtocolVersion + 1
        #expect(Self.incompatible { _ = try machine.received(.hello(newer)) })
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [:]))
        #expect(Self.violation { _ = try machine.received(.hello(Self.hello(summary: [:]))) })
    }

    // MARK: Want and paging

    /// A Want is answered in pages bounded by the change limit, each after the cursor of the last, then Done with
    /// the summary fixed when the Want came.
    @Test func wantIsAnsweredInPagesThenDone() throws {
        var options = SessionOptions()
        options.maxBatchChanges = 2
        options.maxBatchBytes = 10_000
        var machine = Self.machine(options)
        let mine: Summary = [Self.mine: 5]
        _ = try Self.greet(
            &machine, hello: Self.hello(summary: [:], maxFrameSize: 4_096), local: Self.status(summary: mine))
        var actions = try machine.received(.want(Want(have: [Self.mine: 1], baselineOffset: nil)))
        guard case .readSummary = actions.last else { Issue.record("no summary read: \(actions)"); return }
        actions = try machine.answered(.summary(mine))
        guard case .readBaseline = actions.last else { Issue.record("no baseline read: \(actions)"); return }
        #expect(try machine.answered(.baseline(nil)).isEmpty)
        let changes = (2...5).map { Self.change(Self.mine, $0) }
        var cursor: OrderKey?
        for page in [Array(changes[0..<2]), Array(changes[2..<4])] {
            actions = try machine.nextOutgoing()
            guard case let .readPage(have, cap, after, limit, maxBytes) = actions.last else {
                Issue.record("no page read: \(actions)")
                return
            }
            #expect(have == [Self.mine: 1] && cap == mine && after == cursor && limit == 2)
            // The byte budget: the smaller of the option and the peer's frame limit less the frame overhead.
            #expect(maxBytes == 4_096 - 64)
            actions = try machine.answered(.page(baselineSummary: [:], changes: page.map { EncodedChange($0) }, damaged: []))
            #expect(Self.sent(actions) == [.changes(page)])
            cursor = page.last?.orderKey
        }
        actions = try machine.nextOutgoing()
        actions = try machine.answered(.page(baselineSummary: [:], changes: [], damaged: []))
        #expect(Self.sent(actions) == [.done(mine)])
        #expect(machine.sent == 4)
        #expect(try machine.nextOutgoing().isEmpty, "nothing more before the peer answers our Want")
    }

    /// The byte budget of a page is the option when the peer accepts larger frames.
    @Test func pageBudgetIsTheOptionBelowThePeersFrameLimit() throws {
        var options = SessionOptions()
        options.maxBatchBytes = 1_000
        var machine = Self.machine(options)
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [Self.mine: 1]))
        _ = try Self.answerWant(&machine, have: [:], mine: [Self.mine: 1], baseline: nil)
        guard case let .readPage(_, _, _, _, maxBytes) = try machine.nextOutgoing().last else {
            Issue.record("no page read")
            return
        }
        #expect(maxBytes == 1_000)
    }

    // MARK: Baselines

    /// A baseline the peer lacks goes first, in chunks within the budget, and the changes after it.
    @Test func baselineIsSentInChunksBeforeTheChanges() throws {
        var options = SessionOptions()
        options.maxBatchBytes = 1_300
        var machine = Self.machine(options)
        let baselineSummary: Summary = [Self.mine: 3]
        let baseline = EncodedBaseline(summary: baselineSummary, bytes: (0..<3_000).map { UInt8($0 % 251) })
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [Self.mine: 4]))
        _ = try Self.answerWant(&machine, have: [:], mine: [Self.mine: 4], baseline: baseline)
        let chunks = try (0..<3).map { _ in
            try #require(Self.sent(try machine.nextOutgoing()).first.flatMap(Self.chunkOf))
        }
        // Chunks of max(budget - 256, 1024) bytes.
        #expect(chunks.map(\.offset) == [0, 1_044, 2_088])
        #expect(chunks.map(\.last) == [false, false, true])
        #expect(chunks.flatMap(\.data) == baseline.bytes)
        #expect(chunks.allSatisfy { $0.totalSize == 3_000 && $0.baselineSummary == baselineSummary })
        #expect(machine.baselinesSent == 1)
        guard case let .readPage(have, _, _, _, _) = try machine.nextOutgoing().last else {
            Issue.record("no page after the baseline")
            return
        }
        #expect(have == baselineSummary, "the changes the baseline holds are not sent again")
    }

    /// A damaged baseline (bit rot in its stored bytes, bad-luck tester 2026-11-25, H1) is never sent: a peer that
    /// holds every change it folds gets the changes without it; one that lacks some is refused with the damage.
    @Test func aDamagedBaselineIsNeverSent() throws {
        let damaged = EncodedBaseline(summary: [Self.mine: 3], bytes: [], damage: "its bytes are not the ones stored")
        var holding = Self.machine()
        _ = try Self.greet(&holding, hello: Self.hello(summary: [Self.mine: 3]), local: Self.status(summary: [Self.mine: 4]))
        _ = try Self.answerWant(&holding, have: [Self.mine: 3], mine: [Self.mine: 4], baseline: damaged)
        let next = try holding.nextOutgoing()
        #expect(!Self.sent(next).contains { Self.chunkOf($0) != nil }, "\(next)")
        guard case let .readPage(have, _, _, _, _) = next.last else {
            Issue.record("no page: \(next)")
            return
        }
        #expect(have == [Self.mine: 3])

        var lacking = Self.machine()
        _ = try Self.greet(&lacking, hello: Self.hello(summary: [:]), local: Self.status(summary: [Self.mine: 4]))
        #expect {
            _ = try Self.answerWant(&lacking, have: [:], mine: [Self.mine: 4], baseline: damaged)
        } throws: { error in
            guard case let .store(failure) = error as? SessionError else { return false }
            return failure.isDamagedBaseline
        }
    }

    /// A Want asking to resume at an offset gets the baseline from there.
    @Test func baselineResumesAtTheAskedOffset() throws {
        var machine = Self.machine()
        let baseline = EncodedBaseline(summary: [Self.mine: 3], bytes: [UInt8](repeating: 5, count: 3_000))
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [Self.mine: 3]))
        _ = try Self.answerWant(&machine, have: [:], mine: [Self.mine: 3], baseline: baseline, offset: 2_500)
        let chunk = try #require(Self.sent(try machine.nextOutgoing()).first.flatMap(Self.chunkOf))
        #expect(chunk.offset == 2_500 && chunk.data.count == 500 && chunk.last)
    }

    /// A baseline staged from this peer earlier, whose digest and summary its Hello still announces, is resumed:
    /// the first Want asks for the staged offset, later ones do not.
    @Test func stagedBaselineIsResumedFromItsOffset() throws {
        var options = SessionOptions(mode: .agent)
        options.certifiedPeerID = nil
        var machine = Self.machine(options)
        let hello = Self.hello(summary: [Self.theirs: 9], baseline: [Self.theirs: 9], baselineDigest: [4, 2])
        let staged = StagedBaseline(summary: [Self.theirs: 9], digest: [4, 2], total: 8_000, staged: 3_000)
        let actions = try Self.greet(&machine, hello: hello, local: Self.status(summary: [:]), staged: staged)
        #expect(!actions.contains { if case .discardStaged = $0 { true } else { false } })
        #expect(Self.wants(actions) == [Want(have: [:], baselineOffset: 3_000)])
        // The peer's Done, then a Notify of more: the next Want starts afresh.
        _ = try machine.received(.done([:]))
        _ = try machine.answered(.streamEnded([]))
        _ = try machine.answered(.summary([:]))
        var next = try machine.received(.notify([Self.theirs: 10], report: nil))
        next = try machine.answered(.summary([:]))
        next = try machine.answered(.summary([:]))
        #expect(Self.wants(next) == [Want(have: [:], baselineOffset: nil)])
    }

    /// A staged baseline the peer no longer announces is dropped, and the Want starts afresh.
    @Test func stagedBaselineOfAnotherBaselineIsDiscarded() throws {
        var machine = Self.machine()
        let hello = Self.hello(summary: [Self.theirs: 9], baseline: [Self.theirs: 9], baselineDigest: [4, 3])
        let staged = StagedBaseline(summary: [Self.theirs: 9], digest: [4, 2], total: 8_000, staged: 3_000)
        let actions = try Self.greet(&machine, hello: hello, local: Self.status(summary: [:]), staged: staged)
        #expect(actions.contains { if case .discardStaged(Self.peerID, false) = $0 { true } else { false } })
        #expect(Self.wants(actions) == [Want(have: [:], baselineOffset: nil)])
    }

    /// Chunks of a pulled baseline are staged (with the Hello's digest when they are its baseline) and the
    /// last one adopted; a refusal drops the staging and ends the session.
    @Test func pulledBaselineIsStagedThenAdopted() throws {
        var machine = Self.machine()
        let hello = Self.hello(summary: [Self.theirs: 9], baseline: [Self.theirs: 9], baselineDigest: [4, 2])
        let early = BaselineChunk(
            totalSize: 4, offset: 0, data: [1, 2], last: false, baselineSummary: [Self.theirs: 9])
        #expect(Self.violation { _ = try machine.received(.baselineChunk(early)) })
        machine = Self.machine()
        _ = try Self.greet(&machine, hello: hello, local: Self.status(summary: [:]))
        var actions = try machine.received(.baselineChunk(early))
        guard case let .stageChunk(peer, summary, digest, total, offset, data) = actions.last else {
            Issue.record("the chunk was not staged: \(actions)")
            return
        }
        #expect(peer == Self.peerID && summary == [Self.theirs: 9] && digest == [4, 2])
        #expect(total == 4 && offset == 0 && data == [1, 2])
        #expect(try machine.answered(.staged).isEmpty)
        let last = BaselineChunk(totalSize: 4, offset: 2, data: [3, 4], last: true, baselineSummary: [Self.theirs: 9])
        actions = try machine.received(.baselineChunk(last))
        actions = try machine.answered(.staged)
        guard case .adoptBaseline(Self.peerID) = actions.last else { Issue.record("not adopted: \(actions)"); return }
        actions = try machine.answered(
            .adopted(BaselineAdoption(changed: true, summary: [Self.theirs: 9], foldedAway: 0, replayed: 0)))
        #expect(Self.pulledCounts(actions) == [0])
        #expect(machine.baselinesPulled == 1)
        // Another chunk that the store refuses.
        _ = try machine.received(.baselineChunk(early))
        actions = try machine.answered(.baselineFailed(.rejected(.corruptSnapshot("bad baseline"))))
        #expect(actions.count == 2)
        #expect(actions.first.map { if case .discardStaged(Self.peerID, true) = $0 { true } else { false } } == true)
        guard case let .fail(error) = actions.last, case .baselineRefused = error else {
            Issue.record("the refusal did not end the session: \(actions)")
            return
        }
    }

    // MARK: Done

    /// Done is accepted when this device now holds what it announced; short of it, the session fails.
    @Test func doneChecksTheAnnouncedSummary() throws {
        var machine = Self.machine()
        #expect(Self.violation { _ = try machine.received(.done([:])) })
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 4]), local: Self.status(summary: [:]))
        _ = try machine.received(.done([Self.theirs: 4]))
        _ = try machine.answered(.streamEnded([]))
        #expect {
            _ = try machine.answered(.summary([Self.theirs: 2]))
        } throws: { error in
            guard case let .incompleteStream(missing) = error as? SessionError else { return false }
            return missing.map(\.timeline) == [Self.theirs] && missing.map(\.seqs) == [3...4]
        }
        machine = Self.machine()
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 4]), local: Self.status(summary: [:]))
        _ = try machine.received(.done([Self.theirs: 4]))
        _ = try machine.answered(.streamEnded([]))
        #expect(try machine.answered(.summary([Self.theirs: 4])).isEmpty)
        #expect(!machine.isSynced, "the peer's Want is not answered yet")
        _ = try Self.answerWant(&machine, have: [Self.theirs: 4], mine: [Self.theirs: 4], baseline: nil)
        _ = try machine.nextOutgoing()
        _ = try machine.answered(.page(baselineSummary: [:], changes: [], damaged: []))
        #expect(machine.isSynced)
        // One-shot: the state report, then Close.
        guard case .readStatus = try machine.nextOutgoing().last else { Issue.record("no state report"); return }
        let report = try machine.answered(.status(Self.status(summary: [Self.theirs: 4], digest: [3])))
        guard case let .notify(summary, report?, _) = Self.sent(report).first else { Issue.record("no Notify"); return }
        #expect(summary == [Self.theirs: 4] && report.stateDigest == [3])
        #expect(Self.sent(try machine.nextOutgoing()) == [.close(reason: "done")])
        #expect(try machine.nextOutgoing().isEmpty)
    }

    /// A peer that holds a timeline as far as this device and asks for it from where both baselines end is
    /// resolving a fork of it (bad-luck tester 2026-11-25, H9): its changes past the fork go to a branch as it
    /// takes this side's, so what its Hello announced of the timeline is not owed. A Want asking from elsewhere is
    /// no such sign, and the announced changes stay owed.
    @Test func aPeerResolvingAForkIsNotOwedWhatItAnnouncedOfIt() throws {
        for (asked, owed) in [(UInt64(0), false), (UInt64(3), true)] {
            var machine = Self.machine()
            _ = try Self.greet(
                &machine, hello: Self.hello(summary: [Self.theirs: 8]), local: Self.status(summary: [Self.theirs: 6]))
            _ = try Self.answerWant(&machine, have: [Self.theirs: asked], mine: [Self.theirs: 6], baseline: nil)
            _ = try machine.nextOutgoing()
            _ = try machine.answered(.page(baselineSummary: [:], changes: [], damaged: []))
            _ = try machine.received(.done([Self.theirs: 8]))
            _ = try machine.answered(.streamEnded([]))
            if owed {
                #expect(throws: SessionError.self, "asked from \(asked)") {
                    _ = try machine.answered(.summary([Self.theirs: 6]))
                }
            } else {
                _ = try machine.answered(.summary([Self.theirs: 6]))
            }
        }
    }

    // MARK: Notify

    /// Agent mode: a Notify of more than this device holds brings a Want; one of nothing new brings nothing; one
    /// arriving while a Want is out brings a Want after its Done.
    @Test func notifyOfMoreBringsAWant() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 2]), local: Self.status(summary: [:]))
        // A Want is out (from the greeting): a Notify of more waits for its Done.
        _ = try machine.received(.notify([Self.theirs: 3], report: nil))
        #expect(try machine.answered(.summary([:])).isEmpty)
        _ = try machine.received(.done([Self.theirs: 2]))
        _ = try machine.answered(.streamEnded([]))
        var actions = try machine.answered(.summary([Self.theirs: 2]))
        guard case .readSummary = actions.last else { Issue.record("no Want after Done: \(actions)"); return }
        actions = try machine.answered(.summary([Self.theirs: 2]))
        #expect(Self.wants(actions) == [Want(have: [Self.theirs: 2], baselineOffset: nil)])
        _ = try machine.received(.done([Self.theirs: 3]))
        _ = try machine.answered(.streamEnded([]))
        #expect(try machine.answered(.summary([Self.theirs: 3])).isEmpty)
        // Nothing new: no Want.
        _ = try machine.received(.notify([Self.theirs: 3], report: nil))
        #expect(try machine.answered(.summary([Self.theirs: 3])).isEmpty)
        // More: a Want at once.
        _ = try machine.received(.notify([Self.theirs: 5], report: nil))
        actions = try machine.answered(.summary([Self.theirs: 3]))
        actions = try machine.answered(.summary([Self.theirs: 3]))
        #expect(Self.wants(actions) == [Want(have: [Self.theirs: 3], baselineOffset: nil)])
    }

    /// Agent mode: each Notify tells the agent what the peer now holds (`onOffered`), what its progress events
    /// count "missing" against; a one-shot session has no such events.
    @Test func aNotifyTellsWhatThePeerNowHolds() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 2]), local: Self.status(summary: [:]))
        let actions = try machine.received(.notify([Self.theirs: 7], report: nil))
        let offered = actions.compactMap { action -> Summary? in
            if case let .offered(summary) = action { return summary }
            return nil
        }
        #expect(offered == [[Self.theirs: 7]], "\(actions)")
    }

    /// One-shot sessions read nothing for a Notify without a report.
    @Test func oneShotIgnoresNotify() throws {
        var machine = Self.machine()
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 2]), local: Self.status(summary: [:]))
        #expect(try machine.received(.notify([Self.theirs: 3], report: nil)).isEmpty)
    }

    /// A Notify's state report at equal summaries with another digest is a divergence: reported, recorded on the
    /// peer's row, and cleared when a later report agrees.
    @Test func stateReportOfAnotherDigestIsADivergence() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        let summary: Summary = [Self.theirs: 2]
        let local = Self.status(summary: summary, digest: [1, 1])
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 1]), local: local, compareWith: [:])
        let report = StateReport(stateDigest: [2, 2], baselineDigest: nil, unknownCount: 0)
        var actions = try machine.received(.notify(summary, report: report))
        actions = try machine.answered(.summary(summary))
        guard case .readStatus = actions.last else { Issue.record("no digest read: \(actions)"); return }
        actions = try machine.answered(.status(local))
        let divergence = try #require(machine.divergence)
        #expect(divergence.localDigest == [1, 1] && divergence.peerDigest == [2, 2])
        #expect(Self.findingRecords(actions).map(\.diverged) == [divergence.description])
        #expect(Self.findings(actions) == [divergence.description])
        // Then the notify itself: at this summary nothing is wanted.
        actions = try machine.answered(.summary(summary))
        #expect(actions.isEmpty)
        // Agreement clears it.
        let agreeing = StateReport(stateDigest: [1, 1], baselineDigest: nil, unknownCount: 0)
        _ = try machine.received(.notify(summary, report: agreeing))
        _ = try machine.answered(.summary(summary))
        actions = try machine.answered(.status(local))
        #expect(machine.divergence == nil && machine.verifiedEqual)
        #expect(Self.findingRecords(actions).map(\.diverged) == [nil])
    }

    /// A state report from a peer holding changes this build cannot interpret is not compared.
    @Test func stateReportWithUnknownChangesIsNotCompared() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        let summary: Summary = [Self.theirs: 2]
        _ = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.theirs: 1]), local: Self.status(summary: summary),
            compareWith: [:])
        let report = StateReport(stateDigest: [2, 2], baselineDigest: nil, unknownCount: 1)
        let actions = try machine.received(.notify(summary, report: report))
        // Straight to the Notify's own summary check: no comparison.
        guard case .readSummary = actions.last else { Issue.record("\(actions)"); return }
        #expect(try machine.answered(.summary(summary)).isEmpty)
        #expect(machine.divergence == nil && !machine.verifiedEqual)
    }

    /// Agent mode: a local change sends a Notify with the summary alone at once; no digest is read. The state
    /// report is owed until the session is quiet (`owedReport()`), and goes only if the peer announced the very
    /// summary this side holds: otherwise it could not compare it.
    @Test func localChangeSendsTheSummaryAtOnceAndItsReportWhenQuiet() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        #expect(try machine.localChanged().isEmpty, "nothing before Hello was sent")
        _ = machine.start()
        _ = try machine.answered(.status(Self.status(summary: [Self.theirs: 1])))
        _ = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.theirs: 1]), local: Self.status(summary: [Self.theirs: 1]),
            compareWith: [:])
        var actions = try machine.localChanged()
        guard case .readSummary = actions.last else { Issue.record("\(actions)"); return }
        let mine: Summary = [Self.mine: 1, Self.theirs: 1]
        #expect(Self.sent(try machine.answered(.summary(mine))) == [.notify(mine, report: nil)])
        #expect(!machine.isWaiting && machine.reportOwed, "no status read; a report is owed")

        // Quiet before the peer pulled: it announced another summary, so no report (it owes one).
        actions = try machine.owedReport()
        guard case .readSummary = actions.last else { Issue.record("\(actions)"); return }
        #expect(try machine.answered(.summary(mine)).isEmpty)
        #expect(!machine.reportOwed && !machine.isWaiting)

        // Another change; the peer pulls it and announces the summary: the owed report now goes.
        _ = try machine.localChanged()
        let later: Summary = [Self.mine: 2, Self.theirs: 1]
        _ = try machine.answered(.summary(later))
        _ = try machine.received(.notify(later, report: nil))
        _ = try machine.answered(.summary(later))
        actions = try machine.owedReport()
        guard case .readSummary = actions.last else { Issue.record("\(actions)"); return }
        actions = try machine.answered(.summary(later))
        guard case .readStatus = actions.last else { Issue.record("\(actions)"); return }
        let status = Self.status(summary: later, digest: [5], unknown: 2)
        let report = StateReport(stateDigest: [5], baselineDigest: nil, unknownCount: 2)
        #expect(Self.sent(try machine.answered(.status(status))) == [.notify(later, report: report)])
        #expect(try machine.owedReport().isEmpty, "owed once")
    }

    // MARK: Forks

    /// A head hash that differs at a number both hold is a fork: recorded, reported, excluded from the Want,
    /// and no state comparison is made.
    @Test func forkAtGreetingIsRecordedAndExcluded() throws {
        var machine = Self.machine()
        let local = Self.status(summary: [Self.theirs: 5])
        var hello = Self.hello(summary: [Self.theirs: 3])
        hello.headHashes[Self.theirs] = HeadHash(seq: 3, hash: [0xBA, 0xD])
        var actions = try machine.received(.hello(hello))
        actions = try machine.answered(.greeting(staged: nil, view: local.view, quarantined: []))
        actions = try machine.answered(.hashes([ChangeRef(timeline: Self.theirs, seq: 3): Self.hash(Self.theirs, 3)]))
        let fork = try #require(machine.forkedTimelines.first)
        #expect(fork.timeline == Self.theirs && fork.localHead == 5 && fork.peerHead == 3 && fork.detectedLocally)
        let record = ForkRecordEntry(timeline: Self.theirs, seq: 3, detail: fork.description)
        #expect(Self.forkRecords(actions) == [[record]])
        #expect(Self.findings(actions) == [fork.description])
        actions = try machine.answered(.summary(local.summary))
        var have = local.summary
        have[Self.theirs] = SessionMachine.excluded
        #expect(Self.wants(actions) == [Want(have: have, baselineOffset: nil)])
        #expect(!machine.isWaiting, "no state comparison with a fork")
    }

    /// The peer's Want excluding a timeline tells this side of a fork: recorded, reported, and the stream
    /// excludes it too.
    @Test func forkReportedByThePeersWant() throws {
        var machine = Self.machine()
        let mine: Summary = [Self.theirs: 5, Self.mine: 2]
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 7]), local: Self.status(summary: mine))
        let excluding = Want(have: [Self.theirs: SessionMachine.excluded], baselineOffset: nil)
        var actions = try machine.received(.want(excluding))
        actions = try machine.answered(.summary(mine))
        let fork = try #require(machine.forkedTimelines.first)
        #expect(fork.timeline == Self.theirs && fork.localHead == 5 && fork.peerHead == 7 && !fork.detectedLocally)
        let record = ForkRecordEntry(timeline: Self.theirs, seq: 5, detail: fork.description)
        #expect(Self.forkRecords(actions) == [[record]])
        #expect(Self.findings(actions) == [fork.description])
        _ = try machine.answered(.baseline(nil))
        guard case let .readPage(have, _, _, _, _) = try machine.nextOutgoing().last else {
            Issue.record("no page")
            return
        }
        #expect(have[Self.theirs] == SessionMachine.excluded)
        // A baseline holding the forked timeline is never sent to this peer.
        machine = Self.machine()
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 7]), local: Self.status(summary: mine))
        #expect {
            _ = try Self.answerWant(
                &machine, have: [Self.theirs: SessionMachine.excluded], mine: mine,
                baseline: EncodedBaseline(summary: [Self.theirs: 5], bytes: [1]))
        } throws: { error in
            guard case let .forkInsideBaseline(timeline) = error as? SessionError else { return false }
            return timeline == Self.theirs
        }
    }

    /// A fork found while integrating: its local head is read after the batch, it is recorded, and the
    /// timeline's changes are skipped from then on.
    @Test func forkFoundWhileIntegrating() throws {
        var machine = Self.machine()
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 6]), local: Self.status(summary: [:]))
        let batch = [Self.change(Self.theirs, 4)]
        var actions = try machine.received(.changes(batch))
        guard case let .integrate(sentBatch, skip) = actions.last else { Issue.record("\(actions)"); return }
        #expect(sentBatch.map(\.change) == batch && skip.isEmpty)
        let refusal = RefusedTimeline(timeline: Self.theirs, refusal: .fork(seq: 4, held: [1], arriving: [2]))
        actions = try machine.answered(.integrated(Replica.IntegrateResult(added: 0, refused: [refusal])))
        guard case .readSummary = actions.last else { Issue.record("no head read: \(actions)"); return }
        actions = try machine.answered(.summary([Self.theirs: 4]))
        let fork = try #require(machine.forkedTimelines.first)
        #expect(fork.localHead == 4 && fork.peerHead == 6)
        #expect(Self.forkRecords(actions).count == 1)
        #expect(Self.findings(actions).count == 1 && Self.pulledCounts(actions).isEmpty)
        guard case let .integrate(_, skipped) = try machine.received(.changes(batch)).last else {
            Issue.record("no integration")
            return
        }
        #expect(skipped == [Self.theirs])
    }

    // MARK: Stale claim

    /// A peer holding this device's own timeline beyond its head: recorded at once, never acted on, and said once
    /// the pull it starts is answered and it still stands.
    @Test func staleClaimIsReported() throws {
        var machine = Self.machine()
        let actions = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.mine: 9]), local: Self.status(summary: [Self.mine: 4]))
        let claim = try #require(machine.staleClaim)
        #expect(claim.timeline == Self.mine && claim.localHead == 4 && claim.peerHead == 9)
        #expect(Self.findingRecords(actions).map(\.claim) == [claim.description])
        #expect(Self.wants(actions) == [Want(have: [Self.mine: 4], baselineOffset: nil)], "the Want is unchanged")
        #expect(Self.findings(actions).isEmpty, "said when the pull is answered, not before")
        _ = try machine.received(.done([Self.mine: 9]))
        _ = try machine.answered(.streamEnded([]))
        #expect(Self.findings(try machine.answered(.summary([Self.mine: 9]))) == [claim.description])
        #expect(machine.staleClaim == claim)
    }

    /// A claim still standing when the session fails before the pull it started is answered is said then (code
    /// review of the twenty-third stop: deferred to the pull's Done, it was never said when that Done never came).
    @Test func aStandingClaimIsSaidWhenTheSessionFailsFirst() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.mine: 9]), local: Self.status(summary: [Self.mine: 4]))
        _ = try machine.received(.done([Self.mine: 9]))
        _ = try machine.answered(.streamEnded([]))
        #expect(throws: SessionError.self) { _ = try machine.answered(.summary([Self.mine: 4])) }
        let claim = try #require(machine.staleClaim)
        #expect(machine.takeUnsaidClaim() == claim.description)
        #expect(machine.takeUnsaidClaim() == nil, "said once")
    }

    /// A pulled baseline refused for folding another history of a timeline than the one held here: a fork inside
    /// the baseline, which renaming cannot resolve. It is recorded as a fork with the peer (so `doctor` reports it
    /// and `rejoin` finds it), and the session fails saying what to do (bad-luck tester 2026-11-25-j, J1).
    @Test func aBaselineRefusedForAForkRecordsTheFork() throws {
        var machine = Self.machine()
        let hello = Self.hello(summary: [Self.mine: 8], baseline: [Self.mine: 6], baselineDigest: [4, 2])
        _ = try Self.greet(&machine, hello: hello, local: Self.status(summary: [Self.mine: 9]))
        let chunk = BaselineChunk(totalSize: 2, offset: 0, data: [1, 2], last: true, baselineSummary: [Self.mine: 6])
        _ = try machine.received(.baselineChunk(chunk))
        _ = try machine.answered(.staged)
        let actions = try machine.answered(.baselineFailed(.rejected(.fork(timeline: Self.mine, seq: 6))))
        #expect(Self.forkRecords(actions).map { $0.map(\.timeline) } == [[Self.mine]], "\(actions)")
        guard case let .fail(.forkInsideBaseline(timeline)) = actions.last else {
            Issue.record("the session did not fail with the fork inside the baseline: \(actions)")
            return
        }
        #expect(timeline == Self.mine && SessionError.forkInsideBaseline(timeline: timeline).description.contains("plait rejoin"))
        #expect(machine.forkedTimelines.map(\.timeline) == [Self.mine])
    }

    /// A claim the pull's baseline shows to need nothing (its adoption: authoring goes on, the next edit begins a
    /// new timeline) is never said: the agent logged "run `plait rejoin`" as an error at the greeting of a restored
    /// peer, and the session then dropped the claim (hostile tester 2026-11-25-i, I5).
    @Test func aClaimTheBaselineSettlesIsNeverSaid() throws {
        for mode in [SessionMode.agent, .oneShot] {
            var machine = Self.machine(SessionOptions(mode: mode))
            let hello = Self.hello(summary: [Self.mine: 10], baseline: [Self.mine: 10], baselineDigest: [4, 2])
            var actions = try Self.greet(&machine, hello: hello, local: Self.status(summary: [Self.mine: 7]))
            #expect(machine.staleClaim != nil)
            let chunk = BaselineChunk(
                totalSize: 2, offset: 0, data: [1, 2], last: true, baselineSummary: [Self.mine: 10])
            actions += try machine.received(.baselineChunk(chunk))
            actions += try machine.answered(.staged)
            var adoption = BaselineAdoption(changed: true, summary: [Self.mine: 10], foldedAway: 7, replayed: 0)
            adoption.keptAside = 8...9
            adoption.authoringGoesOn = true
            actions += try machine.answered(.adopted(adoption))
            actions += try machine.received(.done([Self.mine: 10]))
            actions += try machine.answered(.streamEnded([]))
            actions += try machine.answered(.summary([Self.mine: 10]))
            #expect(machine.staleClaim == nil, "\(mode)")
            let claims = Self.findings(actions).filter { $0.contains("plait rejoin") }
            #expect(claims.isEmpty, "\(mode): \(claims)")
            #expect(Self.findingRecords(actions).last?.claim == nil, "\(mode): the recorded claim is cleared")
        }
    }

    /// The same claim in a Notify is the Hello's claim: a paired peer's Notify naming this device's own timeline
    /// beyond its head was taken as what it holds, and `peers` said "ahead" with no warning (fourth hostile tester
    /// of 2026-11-25, F6). Said and recorded once a session.
    @Test func aNotifyClaimingTheOwnTimelineIsReported() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.mine: 4]), local: Self.status(summary: [Self.mine: 4]))
        #expect(machine.staleClaim == nil)
        _ = try machine.received(.notify([Self.mine: 1004], report: nil))
        var actions = try machine.answered(.summary([Self.mine: 4]))
        let claim = try #require(machine.staleClaim)
        #expect(claim.timeline == Self.mine && claim.localHead == 4 && claim.peerHead == 1004)
        #expect(Self.findingRecords(actions).map(\.claim) == [claim.description])
        // Said once the Want it brings (after the greeting's) is answered, and still standing.
        _ = try machine.received(.done([Self.mine: 4]))
        _ = try machine.answered(.streamEnded([]))
        actions = try machine.answered(.summary([Self.mine: 4]))
        actions += try machine.answered(.summary([Self.mine: 4]))
        #expect(Self.wants(actions) == [Want(have: [Self.mine: 4], baselineOffset: nil)])
        #expect(Self.findings(actions).isEmpty, "\(actions)")
        _ = try machine.received(.done([Self.mine: 1004]))
        _ = try machine.answered(.streamEnded([]))
        #expect(Self.findings(try machine.answered(.summary([Self.mine: 1004]))) == [claim.description])
        _ = try machine.received(.notify([Self.mine: 2004], report: nil))
        let again = try machine.answered(.summary([Self.mine: 1004]))
        #expect(Self.findings(again).isEmpty && Self.findingRecords(again).isEmpty, "said once: \(again)")
        // Its own changes written since the greeting are no claim: the peer may hold what this device sent.
        var later = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(
            &later, hello: Self.hello(summary: [Self.mine: 4]), local: Self.status(summary: [Self.mine: 4]))
        _ = try later.received(.notify([Self.mine: 6], report: nil))
        #expect(Self.findings(try later.answered(.summary([Self.mine: 6]))).isEmpty && later.staleClaim == nil)
    }

    /// A one-shot session reads its summary for a Notify only when it may claim the own timeline (its closing
    /// report is what `plait sync` records as the peer's), and reports the claim as the Hello's.
    @Test func aClosingReportClaimingTheOwnTimelineIsReported() throws {
        var machine = Self.machine()
        _ = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.mine: 4]), local: Self.status(summary: [Self.mine: 4]))
        let read = try machine.received(.notify([Self.mine: 50], report: nil))
        guard case .readSummary = read.last else { Issue.record("no summary read: \(read)"); return }
        let actions = try machine.answered(.summary([Self.mine: 4]))
        let claim = try #require(machine.staleClaim)
        #expect(claim.peerHead == 50 && Self.findings(actions) == [claim.description])
        #expect(Self.wants(actions).isEmpty, "a one-shot session wants nothing for a Notify")
    }

    /// The peer's clean close before its Hello says it is busy or stopping, not that the sync broke off midway (nor,
    /// in the sync that shows it, that the peer refused this device: that comes as an alert or a reset).
    @Test func aCloseBeforeTheHelloIsTheBusyPeers() throws {
        var machine = Self.machine()
        _ = machine.start()
        let early = Result { () throws(SessionError) in try machine.peerEndedStream(midFrame: false) }
        #expect(early.failure?.description == SessionError.closedBeforeHello.description, "\(early)")
        var greeted = Self.machine()
        _ = try Self.greet(&greeted, hello: Self.hello(summary: [Self.theirs: 2]), local: Self.status(summary: [:]))
        let late = Result { () throws(SessionError) in try greeted.peerEndedStream(midFrame: false) }
        #expect(late.failure?.description == SessionError.connectionLost(midFrame: false).description, "\(late)")
    }

    /// Changes of the own timeline set aside as damaged are expected at a peer: healing, not a claim.
    @Test func quarantinedOwnChangesAreNoClaim() throws {
        var machine = Self.machine()
        let setAside = QuarantinedRange(timeline: Self.mine, seqs: 5...9, reason: "damaged")
        let actions = try Self.greet(
            &machine, hello: Self.hello(summary: [Self.mine: 9]), local: Self.status(summary: [Self.mine: 4]),
            quarantined: [setAside])
        #expect(machine.staleClaim == nil && Self.findings(actions).isEmpty)
    }

    // MARK: Refusals

    /// A timeline refused in a batch: reported, recorded, skipped in later batches, marked in later Wants, and
    /// not expected at Done; the other timelines of the batch count as pulled.
    @Test func refusedTimelineIsSkippedAfterwards() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        let hello = Self.hello(summary: [Self.theirs: 6, Self.other: 2])
        _ = try Self.greet(&machine, hello: hello, local: Self.status(summary: [:]))
        var actions = try machine.received(.changes([Self.change(Self.other, 1), Self.change(Self.theirs, 1)]))
        let refusal = RefusedTimeline(timeline: Self.theirs, refusal: .brokenChain(seq: 1))
        actions = try machine.answered(.integrated(Replica.IntegrateResult(added: 1, refused: [refusal])))
        #expect(machine.refusedTimelines == [refusal] && machine.pulled == 1)
        #expect(Self.findings(actions) == ["changes of \(Self.theirs) from the peer were refused: \(refusal.refusal)"])
        #expect(Self.findingRecords(actions).map(\.refused) == [refusal.description])
        #expect(Self.pulledCounts(actions) == [1])
        guard case let .integrate(_, skip) = try machine.received(.changes([Self.change(Self.theirs, 2)])).last else {
            Issue.record("no integration")
            return
        }
        #expect(skip == [Self.theirs])
        _ = try machine.answered(.integrated(Replica.IntegrateResult()))
        // Done short of the refused timeline is complete.
        _ = try machine.received(.done([Self.theirs: 6, Self.other: 2]))
        _ = try machine.answered(.streamEnded([]))
        #expect(try machine.answered(.summary([Self.other: 2])).isEmpty)
        // The next Want says "send nothing of it".
        actions = try machine.resync()
        actions = try machine.answered(.summary([Self.other: 2]))
        #expect(
            Self.wants(actions)
                == [Want(have: [Self.other: 2, Self.theirs: SessionMachine.refusedMarker], baselineOffset: nil)])
    }

    /// Protocol 2: changes held back for a signature that never came are given up at Done. Their timeline is
    /// refused (reported, recorded, skipped) and not expected at Done; the stream is otherwise complete.
    @Test func changesStillHeldBackAtDoneRefuseTheirTimeline() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(&machine, hello: Self.hello(summary: [Self.theirs: 3]), local: Self.status(summary: [:]))
        _ = try machine.received(.changes([Self.change(Self.theirs, 1)]))
        _ = try machine.answered(.integrated(Replica.IntegrateResult()))
        guard case .endStream = try machine.received(.done([Self.theirs: 3])).last else {
            Issue.record("Done did not end the intake's stream")
            return
        }
        let refusal = RefusedTimeline(timeline: Self.theirs, refusal: .unsigned(seq: 1))
        let actions = try machine.answered(.streamEnded([refusal]))
        #expect(machine.refusedTimelines == [refusal])
        #expect(Self.findings(actions) == ["changes of \(Self.theirs) from the peer were refused: \(refusal.refusal)"])
        guard case .readSummary = actions.last else {
            Issue.record("no summary read after the stream ended: \(actions)")
            return
        }
        // Nothing of the refused timeline is held, and that is not an incomplete stream.
        #expect(try machine.answered(.summary([:])).isEmpty)
    }

    /// Changes nobody asked for break the protocol.
    @Test func changesWithoutWantAreRefused() throws {
        var machine = Self.machine()
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [:]))
        _ = try machine.received(.done([:]))
        _ = try machine.answered(.streamEnded([]))
        _ = try machine.answered(.summary([:]))
        #expect(Self.violation { _ = try machine.received(.changes([Self.change(Self.theirs, 1)])) })
    }

    // MARK: Damaged stored changes, Ping, Close

    /// A damaged stored change found while paging: its timeline stops before it, it is set aside, and the rest
    /// of the page goes.
    @Test func damagedStoredChangeIsSetAside() throws {
        var machine = Self.machine()
        let mine: Summary = [Self.mine: 3, Self.other: 1]
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: mine))
        _ = try Self.answerWant(&machine, have: [:], mine: mine, baseline: nil)
        _ = try machine.nextOutgoing()
        let page = [Self.change(Self.mine, 1), Self.change(Self.other, 1), Self.change(Self.mine, 2)]
        let damagedRef = ChangeRef(timeline: Self.mine, seq: 2)
        let actions = try machine.answered(.page(baselineSummary: [:], changes: page.map { EncodedChange($0) }, damaged: [damagedRef]))
        #expect(Self.sent(actions) == [.changes(Array(page[0..<2]))])
        #expect(machine.damaged == [damagedRef] && Self.findings(actions).count == 1)
        let setAside = DamagedChange(ref: damagedRef, following: 0)
        #expect(actions.contains { if case .quarantine(setAside, _) = $0 { true } else { false } })
        guard case let .readPage(_, cap, _, _, _) = try machine.nextOutgoing().last else {
            Issue.record("no page")
            return
        }
        #expect(cap == [Self.mine: 1, Self.other: 1])
    }

    /// Ping is answered with Pong of the same nonce; a one-shot peer closing before the sync finished is an error.
    @Test func pingAndEarlyClose() throws {
        var machine = Self.machine()
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [:]))
        #expect(Self.sent(try machine.received(.ping(nonce: 42))) == [.pong(nonce: 42)])
        #expect {
            _ = try machine.received(.close(reason: "bored"))
        } throws: { error in
            guard case let .peerClosed(reason) = error as? SessionError else { return false }
            return reason == "bored"
        }
    }

    /// Agent mode: the peer's Close is answered with a Close, and the session is complete.
    @Test func agentAnswersCloseWithClose() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [:]))
        #expect(Self.sent(try machine.received(.close(reason: "stopped"))) == [.close(reason: "closing")])
        #expect(machine.isComplete && machine.peerCloseReason == "stopped")
    }

    /// An agent answers a one-shot sync's Close with its state report, then its Close: the sync learns what the
    /// agent stored (PROTOCOL.md §13.5), where before it assumed the agent held everything it had sent.
    @Test func agentAnswersAOneShotCloseWithItsReport() throws {
        var machine = Self.machine(SessionOptions(mode: .agent))
        var hello = Self.hello(summary: [:])
        hello.oneShot = true
        _ = try Self.greet(&machine, hello: hello, local: Self.status(summary: [:]))
        let actions = try machine.received(.close(reason: "done"))
        guard case .readStatus = actions.last else { Issue.record("no state report read: \(actions)"); return }
        let sent = Self.sent(try machine.answered(.status(Self.status(summary: [Self.theirs: 3], digest: [4]))))
        guard case let .notify(summary, report?, _) = sent.first else { Issue.record("no report: \(sent)"); return }
        #expect(summary == [Self.theirs: 3] && report.stateDigest == [4])
        #expect(sent.last == .close(reason: "closing") && sent.count == 2, "\(sent)")
    }

    /// One-shot: what a Done named beyond the peer's Want, and its closing report holds less of, is named as not
    /// stored; a fork, or a report holding it all, names nothing. Without a report nothing is said.
    @Test func aClosingReportShortOfTheDoneNamesWhatThePeerDidNotStore() throws {
        for (report, expected) in [
            ([Self.mine: 1] as Summary, [UntakenChanges(timeline: Self.other, peerHolds: 0, sentUpTo: 1)]),
            ([Self.mine: 1, Self.other: 1], []),
        ] {
            var machine = Self.machine()
            _ = try Self.greet(&machine, hello: Self.hello(summary: [:]), local: Self.status(summary: [:]))
            _ = try Self.answerWant(&machine, have: [:], mine: [Self.mine: 1, Self.other: 1], baseline: nil)
            _ = try machine.nextOutgoing()
            _ = try machine.answered(.page(baselineSummary: [:], changes: [], damaged: []))
            #expect(machine.untaken.isEmpty, "no report yet")
            _ = try machine.received(.notify(report, report: nil))
            #expect(machine.untaken == expected, "report \(report): \(machine.untaken)")
            #expect(machine.peerHolds == report)
        }
    }

    // MARK: Support

    static let me = SessionIdentity(deviceID: "LOCAL-DEVICE", name: "here")
    static let peerID = "PEER-DEVICE"
    static let mine = TimelineID(0x1111)
    static let theirs = TimelineID(0x2222)
    static let other = TimelineID(0x3333)

    static func machine(_ options: SessionOptions = SessionOptions()) -> SessionMachine {
        SessionMachine(identity: me, options: options)
    }

    /// A stand-in hash of change `seq` of `timeline`.
    static func hash(_ timeline: TimelineID, _ seq: UInt64) -> [UInt8] {
        [UInt8(truncatingIfNeeded: timeline.rawValue), UInt8(truncatingIfNeeded: seq)]
    }

    static func change(_ timeline: TimelineID, _ seq: UInt64) -> Change {
        Change(
            timeline: timeline, seq: seq, lamport: seq, previousHash: Change.zeroHash, kind: "item.create", version: 1,
            wallTime: 0, payload: [])
    }

    static func view(_ summary: Summary) -> LocalView {
        var heads: [TimelineID: LocalView.Head] = [:]
        for (timeline, seq) in summary.heads { heads[timeline] = LocalView.Head(seq: seq, hash: hash(timeline, seq)) }
        return LocalView(ownTimeline: mine, summary: summary, heads: heads, baselineSummary: [:], baselineDigest: nil)
    }

    static func status(summary: Summary, digest: [UInt8] = [0], unknown: Int = 0) -> ReplicaStatus {
        ReplicaStatus(view: view(summary), stateDigest: digest, uninterpretable: unknown)
    }

    static func hello(
        summary: Summary, digest: [UInt8] = [0], baseline: Summary = [:], baselineDigest: [UInt8]? = nil,
        maxFrameSize: Int = Frame.defaultMaxSize
    ) -> Hello {
        var heads: [TimelineID: HeadHash] = [:]
        for (timeline, seq) in summary.heads { heads[timeline] = HeadHash(seq: seq, hash: hash(timeline, seq)) }
        return Hello(
            domainName: ListsDomain.name, domainVersion: ListsDomain.version, deviceID: peerID, name: "there",
            summary: summary, headHashes: heads, baselineSummary: baseline, baselineDigest: baselineDigest,
            stateDigest: digest, unknownCount: 0, maxFrameSize: maxFrameSize)
    }

    /// Receives `hello` and answers the reads of the greeting from `local`, up to the Want; then the state
    /// comparison that follows (when there is one) with `compareWith` as this device's summary, and its status
    /// read with `local` unless `stopAtStatus`. Returns every action in order.
    @discardableResult
    static func greet(
        _ machine: inout SessionMachine, hello: Hello, local: ReplicaStatus, staged: StagedBaseline? = nil,
        quarantined: [QuarantinedRange] = [], compareWith: Summary? = nil, stopAtStatus: Bool = false
    ) throws -> [SessionAction] {
        var all: [SessionAction] = []
        var actions = try machine.received(.hello(hello))
        all += actions
        actions = try machine.answered(.greeting(staged: staged, view: local.view, quarantined: quarantined))
        all += actions
        if case let .lookUpHashes(refs) = actions.last {
            var hashes: [ChangeRef: [UInt8]] = [:]
            for ref in refs { hashes[ref] = hash(ref.timeline, ref.seq) }
            actions = try machine.answered(.hashes(hashes))
            all += actions
        }
        guard case .readSummary = actions.last else {
            Issue.record("the greeting read no summary for the Want: \(actions)")
            return all
        }
        actions = try machine.answered(.summary(local.summary))
        all += actions
        if case .readSummary = actions.last {
            actions = try machine.answered(.summary(compareWith ?? local.summary))
            all += actions
            if !stopAtStatus, case .readStatus = actions.last { all += try machine.answered(.status(local)) }
        }
        return all
    }

    /// Receives a Want and answers its reads: this device's summary, then its baseline.
    static func answerWant(
        _ machine: inout SessionMachine, have: Summary, mine: Summary, baseline: EncodedBaseline?,
        offset: UInt64? = nil
    ) throws -> [SessionAction] {
        var actions = try machine.received(.want(Want(have: have, baselineOffset: offset)))
        actions += try machine.answered(.summary(mine))
        actions += try machine.answered(.baseline(baseline))
        return actions
    }

    static func sent(_ actions: [SessionAction]) -> [Message] {
        actions.compactMap { if case let .send(message) = $0 { message } else { nil } }
    }

    static func wants(_ actions: [SessionAction]) -> [Want] {
        sent(actions).compactMap { if case let .want(want) = $0 { want } else { nil } }
    }

    static func findings(_ actions: [SessionAction]) -> [String] {
        actions.compactMap { if case let .finding(text) = $0 { text } else { nil } }
    }

    static func pulledCounts(_ actions: [SessionAction]) -> [Int] {
        actions.compactMap { if case let .pulled(count) = $0 { count } else { nil } }
    }

    static func forkRecords(_ actions: [SessionAction]) -> [[ForkRecordEntry]] {
        actions.compactMap { if case let .recordForks(peer, forks) = $0, peer == peerID { forks } else { nil } }
    }

    struct Findings: Equatable {
        var diverged: String?
        var refused: String?
        var claim: String?
    }

    static func findingRecords(_ actions: [SessionAction]) -> [Findings] {
        actions.compactMap {
            if case let .recordFindings(peer, diverged, refused, claim) = $0, peer == peerID {
                Findings(diverged: diverged, refused: refused, claim: claim)
            } else {
                nil
            }
        }
    }

    static func helloOf(_ message: Message) -> Hello? { if case let .hello(hello) = message { hello } else { nil } }
    static func chunkOf(_ message: Message) -> BaselineChunk? {
        if case let .baselineChunk(chunk) = message { chunk } else { nil }
    }

    static func violation(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch {
            if case .protocolViolation = error as? SessionError { return true }
            return false
        }
    }

    static func incompatible(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch {
            if case .incompatible = error as? SessionError { return true }
            return false
        }
    }
}

extension Summary: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (TimelineID, UInt64)...) {
        self.init(Dictionary(uniqueKeysWithValues: elements))
    }
}

extension Result {
    /// The error, if it failed.
    var failure: Failure? {
        if case let .failure(error) = self { return error }
        return nil
    }
}
