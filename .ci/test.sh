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

if [ -d e2e/browser ] && ! command -v chromium >/dev/null; then
  echo "== installing chromium for the browser tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi

echo "== go test -race"
go test -race -count=1 -timeout 12m ./...

echo "== fuzz (briefly; run longer by hand)"
go test -run='^$' -fuzz='^FuzzParseAndMessageID$' -fuzztime=10s ./hook/
go test -run='^$' -fuzz='^FuzzStandardWebhooksHeader$' -fuzztime=10s ./webhook/
