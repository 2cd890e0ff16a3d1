# go from PATH, else the toolchain's usual home (a fresh machine may not have it on PATH)
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN     := slurmdbd_exporter
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH  ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
# prometheus/common/version's variables: --version and
# slurmdbd_exporter_build_info{version, revision, branch} read them
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) -X $(VERSION_PKG).Branch=$(BRANCH)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The real-Slurm tests share one host: run packages one at a time.
TESTFLAGS ?= -p 1 -count=1 -timeout 60m
# LIVE: the tests that wait for real time on real Slurm (histories,
# forecasts, rollups, the site-shaped cluster, sprio, the golden
# capture). Each writes recordings
# (testdata/recordings) with SLURMDBD_EXPORTER_RECORD=1, which make test
# replays instead; make record rewrites them, on each of RELEASES in turn
# (HOST_ONLY: on the host's 22.05 alone), and make test-live is make
# record and the long soak.
RECORDED  := TestHistoryFidelity|TestRealSlurmRollup|TestForecastAgainstSshare|TestSiteShapedLive
# HOST_ONLY runs on the host's 22.05 alone (these start the host's Slurm
# whatever RELEASES says)
HOST_ONLY := TestSprioRealSlurm|TestRealSlurmReplay
# MEASURED: live measurements that record nothing (make passes, make
# read-budget, make end-records)
MEASURED  := TestPassSchedule|TestReadBudget|TestEndRecordDelay
# UPGRADE: one cluster upgraded in place from 22.05 through the releases
# built under $SLURMDBD_EXPORTER_SLURM_BUILDS, serve watching (make upgrade)
UPGRADE   := TestUpgradeChainLive
LIVE      := $(RECORDED)|$(HOST_ONLY)|$(MEASURED)|$(UPGRADE)
# BESIDE: make test runs TestServeRealSlurm as TestReleasesLive/22.05, the
# three releases' clusters side by side (-parallel 3); make soak and make
# test-live run it alone
BESIDE    := TestServeRealSlurm
RELEASES ?= 22.05 24.11 26.05

.PHONY: build test same-output test-live record passes read-budget end-records demo-alerts test-short bench bench-scale soak load demo demo-tour dashboards package lint golden fuzz clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

## test: every test but the long live ones: unit tests, the built binary end to end, the recordings of real Slurm 22.05, 24.11 and 26.05 replayed, and a live smoke of each release (serve, Prometheus with the shipped rules, check, faults; a 6-minute soak) (installs Debian's packages when missing; needs root)
test:
	$(GO) vet ./...
	cd dashboards/grafana && $(GO) vet ./... && $(GO) test -count=1 ./...
	SLURMDBD_EXPORTER_SOAK=$${SLURMDBD_EXPORTER_SOAK:-6m} $(GO) test $(TESTFLAGS) -parallel 3 -skip '^($(LIVE)|$(BESIDE))$$' ./...

## same-output: this tree's check (table and JSON), explain (--user, --job) and serve's first /metrics on every recording against BASE's (a git revision, default HEAD), built by its own make build in a temporary git worktree: a unified diff for each output that differs (TestSameOutput; starts its own MariaDB; docs/testing.md)
BASE ?= HEAD
same-output:
	@tmp=$$(mktemp -d); trap 'git worktree remove --force '"$$tmp"'/tree; rm -rf '"$$tmp" EXIT; \
	git worktree add --detach --quiet $$tmp/tree $(BASE) && \
	$(MAKE) --no-print-directory -C $$tmp/tree build GO=$(GO) BIN=$$tmp/slurmdbd_exporter && \
	SLURMDBD_EXPORTER_BASE_BINARY=$$tmp/slurmdbd_exporter $(GO) test -count=1 -timeout 30m -v -run '^TestSameOutput$$' ./e2e

## test-live: the long live runs on real Slurm, rewriting the recordings (make record: histories, forecast against sshare, rollup, the site-shaped cluster on each release; sprio, the golden capture on 22.05), the pass schedule (make passes), the read budget (make read-budget), the upgrade chain (make upgrade: needs Slurm builds under SLURMDBD_EXPORTER_SLURM_BUILDS), then the soak for 10 minutes, and beside them the demo's alerts under the shipped rules as they are (make demo-alerts): before a release, and when rebuild, drift or phase code changes (docs/testing.md); log in test-live.log
test-live:
	@$(MAKE) --no-print-directory demo-alerts > demo-alerts.log 2>&1 & demo=$$!; \
	$(MAKE) --no-print-directory record LOG=test-live.log || status=1; \
	$(MAKE) --no-print-directory passes >> test-live.log 2>&1 || status=1; \
	$(MAKE) --no-print-directory read-budget >> test-live.log 2>&1 || status=1; \
	$(MAKE) --no-print-directory upgrade >> test-live.log 2>&1 || status=1; \
	echo "soak on Slurm 22.05"; : > soak.log; \
	SLURMDBD_EXPORTER_SOAK=$${SLURMDBD_EXPORTER_SOAK:-10m} $(GO) test -count=1 -timeout 60m -v -run '^TestServeRealSlurm$$' ./e2e > soak.log 2>&1 || status=1; \
	cat soak.log >> test-live.log; grep -E '^(\s*--- |PASS|FAIL|ok)' soak.log; rm -f soak.log; \
	echo "demo alerts, shipped rules as they are"; wait $$demo || status=1; cat demo-alerts.log >> test-live.log; grep -E '^(\s*--- |PASS|FAIL|ok)|fired|resolved' demo-alerts.log; rm -f demo-alerts.log; exit $${status:-0}

## record: rewrite testdata/recordings from the live tests, on each of RELEASES in turn (root; 25 to 35 minutes a release, the site-shaped cluster's 22 minutes beside the others); log in LOG
LOG ?= record.log
record:
	@: > $(LOG); for r in $(RELEASES); do \
		tests='$(RECORDED)'; [ $$r = 22.05 ] && tests="$$tests|$(HOST_ONLY)"; \
		echo "recording on Slurm $$r" | tee -a $(LOG); \
		SLURMDBD_EXPORTER_RECORD=1 SLURMDBD_EXPORTER_RELEASES=$$r $(GO) test -count=1 -timeout 90m -v -run "^($$tests)\$$" ./e2e >> $(LOG) 2>&1 || status=1; \
	done; ./scripts/recordings-readme.sh; grep -E '^(\s*--- |PASS|FAIL|ok)|^recording on' $(LOG); exit $${status:-0}

## upgrade: one cluster upgraded in place, 22.05 then each release of SLURMDBD_EXPORTER_UPGRADE_CHAIN (default 22.05 23.11 24.05 25.05 25.11 26.05) built under SLURMDBD_EXPORTER_SLURM_BUILDS, with serve and Prometheus watching and jobs running across each hop, recording each hop (testdata/recordings/upgrade; root; about 25 minutes)
upgrade:
	SLURMDBD_EXPORTER_RECORD=1 $(GO) test -count=1 -timeout 60m -v -run '^($(UPGRADE))$$' ./e2e

## passes: how far slurmctld's decay passes fall from their boot's schedule while jobs start and end, on each of RELEASES side by side, for PASS_WATCH (docs/serve.md#pass-schedule; root)
PASS_WATCH ?= 30m
passes:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version)"
	@SLURMDBD_EXPORTER_PASS_WATCH=$(PASS_WATCH) SLURMDBD_EXPORTER_RELEASES="$(RELEASES)" $(GO) test -count=1 -timeout 0 -parallel 3 -v -run '^TestPassSchedule$$' ./e2e > passes.log 2>&1; \
	status=$$?; grep -E '^(\s*--- |PASS|FAIL|ok)|passes:|_test.go' passes.log; rm -f passes.log; exit $$status

## end-records: how long after a job's end its record is in job_table, steady, in a burst of a hundred ends, and with slurmctld or slurmdbd stopped for 20 s, on each of RELEASES side by side (docs/serve.md; root; about 7 minutes)
end-records:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version), $$(date -u +%FT%TZ)"
	@SLURMDBD_EXPORTER_RELEASES="$(RELEASES)" $(GO) test -count=1 -timeout 40m -parallel 3 -v -run '^TestEndRecordDelay$$' ./e2e > end-records.log 2>&1; \
	status=$$?; grep -E '^(\s*--- |PASS|FAIL|ok)|end records:|_test.go' end-records.log; rm -f end-records.log; exit $$status

## read-budget: what serve and check cost slurmctld with the state file hidden, against issue 33's budgets: sshare reads per period (at most 3 in each of the first two, 1 a period after), sdiag's REQUEST_SHARE_INFO, REQUEST_BUILD_INFO (at most 3 a run) and REQUEST_PING, slurmctld's CPU over idle, the exporter's with its children, and check's reads (at most 15, 3 a minute); READ_BUDGET_ASSOCIATIONS (default 10000) generated associations, PriorityCalcPeriod each of READ_BUDGET_CALC (1m 5m) for READ_BUDGET_PERIODS (10 at 1m, 8 at 5m; "5m=6"), on each of READ_BUDGET_RELEASES side by side (root; about 70 minutes)
READ_BUDGET_RELEASES ?= 22.05 26.05
READ_BUDGET_CALC ?= 1m 5m
read-budget:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version), $$(date -u +%FT%TZ)"
	@READ_BUDGET_PERIODS="$(READ_BUDGET_PERIODS)" READ_BUDGET_CALC="$(READ_BUDGET_CALC)" READ_BUDGET_ASSOCIATIONS="$(READ_BUDGET_ASSOCIATIONS)" \
	SLURMDBD_EXPORTER_RELEASES="$(READ_BUDGET_RELEASES)" $(GO) test -count=1 -timeout 150m -parallel 2 -v -run '^TestReadBudget$$' ./e2e > read-budget.log 2>&1; \
	status=$$?; grep -E '^(\s*--- |PASS|FAIL|ok)|read budget|_test.go' read-budget.log; rm -f read-budget.log; exit $$status

## demo-alerts: serve --demo with default flags under Prometheus with the shipped rules as they are (for: in minutes): quiet while healthy, then UsageDrift, FairshareDriftHigh and RollupStalled fire and resolve with the demo's faults, UsageLost fires (about 95 minutes; run beside make record by make test-live)
demo-alerts:
	SLURMDBD_EXPORTER_DEMO_LIVE=1 $(GO) test -count=1 -timeout 130m -v -run '^TestDemoAlerts$$' ./e2e

## test-short: unit tests only, no real Slurm
test-short:
	$(GO) test -short ./...

## bench: the benchmarks recorded in docs/performance.md (the database one starts a throwaway MariaDB)
bench:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version)"
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 -count 5 ./fairshare
	$(GO) test -run '^$$' -bench Load -benchtime 3x ./slurmdbd
	$(GO) test -run '^$$' -bench RebuildJobs -count 3 ./usage
	$(GO) test -run '^$$' -bench Scrape10k -benchtime 500x -count 3 ./collector
	$(GO) test -run '^$$' -bench Publish100k -benchtime 5x ./collector
	$(GO) test -run '^$$' -bench 'Build|Compare100k' -benchmem -benchtime 20x ./engine
	$(GO) test -run '^$$' -bench Recovery -benchtime 2x ./engine
	$(MAKE) bench-scale

## bench-scale: the exporter side by side with sshare on a real slurmctld loaded with the same generated tree (root; SCALE_ASSOCIATIONS, SCALE_MONTHS; SCALE_SITE=1: jobs with memory billed by a fractional weight and QOS UsageFactors 2 and 0; BENCH_BASE=<rev>: that revision's exporter, built in a temporary git worktree, measured beside this tree's, alternating, on the same generated cluster: before and after a change)
bench-scale:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version)"
	@tmp=$$(mktemp -d); trap 'git worktree remove --force '"$$tmp"'/tree 2>/dev/null; rm -rf '"$$tmp" EXIT; \
	if [ -n "$(BENCH_BASE)" ]; then \
		git worktree add --detach --quiet $$tmp/tree $(BENCH_BASE) && \
		$(MAKE) --no-print-directory -C $$tmp/tree build GO=$(GO) BIN=$$tmp/slurmdbd_exporter || exit 1; \
		export SLURMDBD_EXPORTER_BASE_BINARY=$$tmp/slurmdbd_exporter; \
	fi; \
	$(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout 90m ./e2e

## soak: TestServeRealSlurm's healthy mixed workload on real Slurm for DURATION (default 60m), the state file hidden, Prometheus evaluating the shipped rules: prints the alerts seen (must be none), drift and bound percentiles and the inferred phase's error (docs/serve.md)
DURATION ?= 60m
soak:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version)"
	SLURMDBD_EXPORTER_SOAK=$(DURATION) $(GO) test -count=1 -run '^TestServeRealSlurm$$' -v -timeout 0 ./e2e | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|soak:|alarm|Error|error'

## load: 1000 scrapes from 100 clients with TLS and basic auth against serve --demo with 11,112 associations (docs/performance.md)
load:
	@echo "machine: $$(nproc) cores, $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $$($(GO) version)"
	$(GO) test -count=1 -run '^TestLoadTLSBasicAuth$$' -v ./e2e | grep -E 'load_test|^(ok|FAIL|---)'

## demo: serve the bundled simulated cluster (serve --demo: the refresh loop over simulated jobs, passes, rollups and faults) on :10819, show some of its metrics and what to look at
demo: build
	./scripts/demo.sh ./$(BIN)

## demo-tour: the demo after ten minutes (docs/dashboards.md): serve --demo scraped by Debian's prometheus with the shipped rules for MINUTES (default 10), then every dashboard panel's value now and over the run, the alerts pending or firing at any evaluation, machine, date and commit
MINUTES ?= 10
demo-tour: build
	./scripts/demo-tour.py ./$(BIN) --minutes $(MINUTES)

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd dashboards/grafana && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

## package: the deb and rpm packages in dist/ (packaging/package.sh, where nfpm is pinned); a release: make package VERSION=1.2.0
package:
	VERSION=$(VERSION) REVISION=$(REVISION) BRANCH=$(BRANCH) GO=$(GO) ./packaging/package.sh dist

## dashboards: regenerate dashboards/*.json from dashboards/grafana (grafana-foundation-sdk); a test fails when they are stale
dashboards:
	cd dashboards/grafana && $(GO) test -count=1 -run '^TestGenerated$$' -update .

## golden: recapture testdata/slurm-22.05 from real Slurm (about 9 minutes, root)
golden:
	CI= $(GO) test -count=1 -timeout 30m -run TestRealSlurmReplay -update -v ./e2e

## fuzz: each fuzz target (sshare text and JSON parsers, slurm.conf reader, TRES strings) for FUZZTIME
FUZZTIME ?= 2m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./sshare
	$(GO) test -run '^$$' -fuzz '^FuzzParseJSON$$' -fuzztime $(FUZZTIME) ./sshare
	$(GO) test -run '^$$' -fuzz '^FuzzConfig$$' -fuzztime $(FUZZTIME) ./slurmconf
	$(GO) test -run '^$$' -fuzz '^FuzzTRESCount$$' -fuzztime $(FUZZTIME) ./slurmdbd

clean:
	rm -f $(BIN)
	rm -rf dist
