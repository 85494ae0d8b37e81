import Foundation
import Testing

/// `plait bench` with a tiny workload (the real one takes minutes and is not run here), and its measuring helper.
@Suite struct BenchTests {
    /// The helper reports the child's own figures from wait4: a child that touches 150 MiB reports at least
    /// that, a child that allocates nothing reports far less, and the exit status is the child's.
    @Test func measuringHelperReportsTheChildsOwnPeakAndStatus() throws {
        try withSandbox { sandbox in
            func measure(_ command: [String]) throws -> [String: Any] {
                let result = sandbox.root + "/measure-\(UUID().uuidString).json"
                try sandbox.ok(["bench", "--measure-child", result, "--"] + command)
                let data = try #require(FileManager.default.contents(atPath: result), "no result from the helper")
                return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            }
            let big = try measure(["/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=150M", "count=1"])
            #expect(big["exit_status"] as? Int == 0, "\(big)")
            #expect((big["max_rss_kib"] as? Int ?? 0) >= 150 * 1024, "dd's 150 MiB buffer: \(big)")
            // Why the helper exists: a child spawned straight from a large process reports that process's peak
            // (posix_spawn shares its memory until exec, and exec records that memory's peak in the child).
            let large = 200 << 20
            let ballast = UnsafeMutableRawPointer.allocate(byteCount: large, alignment: 4096)
            defer { ballast.deallocate() }
            memset(ballast, 1, large)
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            defer { free(argv[0]) }
            #expect(posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0)
            var status: Int32 = 0
            var usage = rusage()
            #expect(wait4(pid, &status, 0, &usage) == pid)
            #expect(usage.ru_maxrss >= large / 1024, "spawned straight from a 200 MiB process: \(usage.ru_maxrss) KiB")
            // Through the helper (spawned from this same large process), a small child reports its own peak.
            let small = try measure(["/bin/sh", "-c", "exit 3"])
            #expect(small["exit_status"] as? Int == 3, "\(small)")
            #expect((small["max_rss_kib"] as? Int ?? .max) < 100 * 1024, "a shell that allocates nothing: \(small)")
            #expect((small["seconds"] as? Double ?? -1) >= 0)
        }
    }

    /// The page benchmark without Chromium says why it measured nothing, and exits 0 (a bench run elsewhere goes
    /// on).
    @Test func pageBenchSkipsSayingWhyWithoutChromium() throws {
        try withSandbox { sandbox in
            let run = try sandbox.run(
                [
                    "bench", "--page-only", "--runs", "1", "--idle-seconds", "1",
                    "--page-driver", Repository.root + "/tests/browser/page_bench.py",
                ], environment: ["PLAIT_CHROMIUM": sandbox.root + "/no-such-chromium"], timeout: 60)
            #expect(run.succeeded, "\(run)")
            #expect(run.stdout.contains("page benchmark skipped: Chromium is not installed"), "\(run)")
            #expect(!run.stdout.contains("first load"), "\(run)")
        }
    }

    /// With Chromium, the page benchmark loads the page in it and reports a load time per load and the agent's
    /// CPU per run (figures, not judged here: speed is a benchmark on a release build, never a test).
    @Test(.enabled(if: Chromium.path != nil, Comment(rawValue: Chromium.absent)))
    func pageBenchReportsFirstLoadsAndIdleCPU() throws {
        try withSandbox { sandbox in
            let run = try sandbox.run(
                [
                    "bench", "--page-only", "--runs", "1", "--idle-seconds", "1", "--json",
                    "--page-driver", Repository.root + "/tests/browser/page_bench.py",
                ], environment: ["PLAIT_BROWSER_PYTHON": try DriverPython.locate()], timeout: 180)
            #expect(run.succeeded, "\(run)")
            let json = try run.json()
            let loads = try #require(json["page_load_ready_ms"] as? [String: Any], "\(json)")
            #expect((loads["runs"] as? [Double])?.count == 10, "\(loads)")
            #expect((loads["min"] as? Double ?? 0) > 0, "\(loads)")
            let idle = try #require(json["page_idle_cpu_percent"] as? [String: Any], "\(json)")
            #expect((idle["runs"] as? [Double])?.count == 1, "\(idle)")
            #expect(json["page_items"] as? Int == 100)
        }
    }

    /// Every section runs on a small workload and reports its figures as ranges with one value per run.
    @Test func tinyBenchReportsEveryFigure() throws {
        try withSandbox { sandbox in
            let run = try sandbox.run(
                [
                    "bench", "--changes", "1000", "--network-changes", "600", "--batch-lines", "50",
                    "--latency-edits", "3", "--latency-items", "300", "--runs", "2",
                    "--pycrdt-script", sandbox.root + "/no-such-script.py",
                    "--idle-seconds", "1", "--single-transactions", "3", "--json",
                ], timeout: 180)
            #expect(run.succeeded, "\(run)")
            let json = try run.json()
            for workload in ["edits", "growing"] {
                let rate = try #require(json["catchup_\(workload)_changes_per_second"] as? [String: Any], "\(json)")
                #expect((rate["runs"] as? [Double])?.count == 2)
                #expect((rate["min"] as? Double ?? 0) > 0)
                let ceiling = try #require(json["catchup_\(workload)_sqlite_insert_per_second"] as? [String: Any])
                #expect((ceiling["median"] as? Double ?? 0) > 0)
                #expect((json["catchup_\(workload)_ratio_to_sqlite"] as? Double ?? 0) > 0)
                let peak = try #require(json["catchup_\(workload)_peak_rss_mib"] as? [String: Any])
                #expect((peak["min"] as? Double ?? 0) > 1)
            }
            #expect(json["catchup_edits_changes"] as? Int == 600)
            // Signing's cost beside the same work unsigned: catch-up from an unsigned source, and authoring.
            for workload in ["edits", "growing"] {
                let rate = try #require(json["catchup_\(workload)_unsigned_changes_per_second"] as? [String: Any])
                #expect((rate["runs"] as? [Double])?.count == 2, "\(rate)")
                #expect((json["catchup_\(workload)_signed_to_unsigned"] as? Double ?? 0) > 0)
                #expect((json["catchup_\(workload)_unsigned_bytes_received_per_change"] as? Double ?? 0) > 0)
            }
            for signed in ["signed", "unsigned"] {
                for figure in ["batch", "single"] {
                    let rate = try #require(json["authoring_\(signed)_\(figure)_changes_per_second"] as? [String: Any])
                    #expect((rate["runs"] as? [Double])?.count == 2, "\(signed) \(figure): \(rate)")
                }
                #expect((json["authoring_\(signed)_bytes_per_change"] as? Double ?? 0) > 0)
            }
            // 50 lines in one transaction: its last change signed; three one-line batches: each signed.
            #expect(json["authoring_signed_batch_signatures"] as? Int == 1, "\(json)")
            #expect(json["authoring_signed_single_signatures"] as? Int == 3)
            #expect(json["authoring_unsigned_batch_signatures"] as? Int == 0)
            #expect(json["catchup_growing_changes"] as? Int == 700, "100 lists, then 600 items")
            #expect((json["pycrdt_skipped"] as? String)?.contains("does not exist") == true, "\(json)")
            for key in [
                "full_replay_seconds", "late_change_ms", "late_change_cold_ms", "show_json_seconds", "add_ms",
                "add_peak_rss_mib", "edit_latency_p50_ms", "edit_latency_p99_ms", "edit_latency_grown_p50_ms",
                "edit_latency_grown_p99_ms", "idle_cpu_percent",
                "api_edit_latency_p50_ms", "api_edit_latency_p99_ms",
            ] {
                let sample = try #require(json[key] as? [String: Any], "\(key) missing: \(json)")
                #expect((sample["runs"] as? [Double])?.count == 2, "\(key): \(sample)")
            }
        }
    }
}
