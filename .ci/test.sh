#!/usr/bin/env bash
# The whole test suite, exactly as the README gives it. It installs what the
# tests need when it is missing, so it passes on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

if compgen -G "views/*.templ" >/dev/null; then
  echo "== templ generate is up to date"
  go tool templ generate -path views >/dev/null
  if ! git diff --quiet -- views; then
    echo "go tool templ generate changed views/: run it and commit the result"; git diff --stat -- views; exit 1
  fi
fi

# The browser tests' screenshots show the corpus's emoji: without a colour
# emoji font Chromium draws empty boxes.
if [ -d e2e/browser ] && { ! command -v chromium >/dev/null || ! dpkg -s fonts-noto-color-emoji >/dev/null 2>&1; }; then
  echo "== installing chromium and an emoji font for the browser tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium fonts-noto-color-emoji >/dev/null
fi

# The offsite backup tests run a real S3-compatible server: versitygw, an
# S3 gateway over a plain folder, built from the Go module proxy (about 3
# minutes on 2 cores the first time, then cached in GOPATH/bin). The tests
# fail under CI when it is missing, so this step is not optional.
VERSITYGW=github.com/versity/versitygw/cmd/versitygw@v1.8.0
gobin="$(go env GOPATH | cut -d: -f1)/bin"
# The two servers below build at the same time, so a fresh machine waits
# for the longer of the two builds, not for both one after the other.
installs=()
if ! command -v versitygw >/dev/null && [ ! -x "$gobin/versitygw" ]; then
  echo "== installing versitygw (the S3-compatible server of the offsite backup tests)"
  go install "$VERSITYGW" & installs+=($!)
fi
export HANDOFF_VERSITYGW="${HANDOFF_VERSITYGW:-$(command -v versitygw || echo "$gobin/versitygw")}"

# The smtp provider's tests run a real SMTP server with an HTTP API:
# Mailpit, built from the Go module proxy (5m0s wall, 1m32s CPU on 2 shared
# cores the first time, then cached in GOPATH/bin). Missing under CI, the
# tests fail, so this step is not optional either.
MAILPIT=github.com/axllent/mailpit@v1.33.1
if ! command -v mailpit >/dev/null && [ ! -x "$gobin/mailpit" ]; then
  echo "== installing mailpit (the SMTP server of the smtp provider tests)"
  go install "$MAILPIT" & installs+=($!)
fi
for pid in "${installs[@]}"; do wait "$pid"; done
export HANDOFF_MAILPIT="${HANDOFF_MAILPIT:-$(command -v mailpit || echo "$gobin/mailpit")}"

# deploy/: the README's curl lines (curl, and openssl for the quick start's
# token), systemd's review of the unit file (systemd-analyze) and the trace
# of the binary against the unit's system-call filter (strace).
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v openssl >/dev/null || missing+=(openssl)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v strace >/dev/null || missing+=(strace)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} for the deploy tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The PostgreSQL engine's tests (store/engine/pgengine, and the store's
# whole suite once more on it below) run a real server: Debian's
# postgresql, whose initdb and postgres the test kit starts in a temporary
# folder as the postgres user (store/engine/pgengine/pgtest). Or set
# HANDOFF_TEST_DATABASE_URL to a server of your own.
if [ -z "${HANDOFF_TEST_DATABASE_URL:-}" ] && ! command -v initdb >/dev/null && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  echo "== installing postgresql for the PostgreSQL engine's tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
# The engine behind a real PgBouncer, in session and in transaction mode
# (store/engine/pgengine's TestPgBouncer, started by pgserver.StartBouncer).
if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
  echo "== installing pgbouncer for the PostgreSQL engine's tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
fi

# The response schema's llama.cpp grammar (drafter/testdata/llamacpp):
# node-llama-cpp converts schema.json to GBNF and llama.cpp's own parser
# parses it; go test checks the committed output without node, and here,
# where node is installed, it is made again and must not differ (about
# 25 s and 85 MB the first time: the CPU build only, nothing compiled).
if command -v node >/dev/null && command -v npm >/dev/null; then
  echo "== llama.cpp grammar of the response schema (node-llama-cpp)"
  # npm install, not npm ci: npm 11's ci refuses this lock for the
  # optional platform builds it leaves out (the versions are pinned exactly).
  (cd drafter/testdata/llamacpp && npm install --omit=optional --ignore-scripts --no-save --no-audit --no-fund >/dev/null && node grammar.mjs 2>/dev/null)
  if ! git diff --quiet -- drafter/testdata/llamacpp; then
    echo "drafter/testdata/llamacpp/grammar.mjs changed its output: commit the result"; git diff --stat -- drafter/testdata/llamacpp; exit 1
  fi
fi

echo "== go test -race"
# Four packages at a time on 2 cores: most of the long ones (e2e, the
# browser's, deploy's) wait on child processes, a browser and fsyncs, and
# with the default -p 2 the cores stood half idle (CPU 15 min in a 14 min
# run; with -p 4, 12 min in 8.5).
go test -race -p 4 -count=1 -timeout 12m ./...

# The store's conformance suite once more, on PostgreSQL: every store test
# but those of the bbolt file itself (boltOnly), each on a schema of its
# own of one private server. About 120 s with -race on 2 shared cores, of
# which half is waiting on the server, so it runs beside the fuzz step
# below and its output is printed when both are done.
echo "== go test -race ./store/... on PostgreSQL (beside the fuzz step)"
pglog=$(mktemp)
HANDOFF_TEST_ENGINE=postgres go test -race -count=1 -timeout 10m ./store/... >"$pglog" 2>&1 &
pgpid=$!
trap 'kill "$pgpid" 2>/dev/null || true' EXIT # a failed fuzz step leaves no run behind

echo "== fuzz (briefly; run longer by hand)"
# Counts of executions, not -fuzztime=10s: with a duration, Go 1.26's fuzz
# coordinator can report its own deadline as a failure ("context deadline
# exceeded", no input written) when a worker is mid-call as it expires,
# which a loaded machine makes likely (golang/go#75804, fixed in Go 1.27).
# A count has no deadline to race. Each is about 10 s here, unloaded.
go test -run='^$' -fuzz='^FuzzParseAndMessageID$' -fuzztime=200000x ./hook/
go test -run='^$' -fuzz='^FuzzSignatures$' -fuzztime=100000x ./hook/
go test -run='^$' -fuzz='^FuzzSelector$' -fuzztime=150000x ./hook/
go test -run='^$' -fuzz='^FuzzStandardWebhooksHeader$' -fuzztime=200000x ./webhook/
go test -run='^$' -fuzz='^FuzzEventForm$' -fuzztime=60000x ./store/
go test -run='^$' -fuzz='^FuzzRecordForms$' -fuzztime=50000x ./store/
go test -run='^$' -fuzz='^FuzzEventReplyTo$' -fuzztime=50000x ./store/
go test -run='^$' -fuzz='^FuzzRecord$' -fuzztime=20000x ./crm/
go test -run='^$' -fuzz='^FuzzRowID$' -fuzztime=50000x ./crm/
go test -run='^$' -fuzz='^FuzzTermKeys$' -fuzztime=50000x ./store/

echo "== go test -race ./store/... on PostgreSQL: its output"
pgrc=0
wait "$pgpid" || pgrc=$?
trap - EXIT
cat "$pglog"; rm -f "$pglog"
exit "$pgrc"
