package drill

import (
	"fmt"
	"strings"
	"time"
)

// sandbox is one sandbox provider of the drill's instance and its knobs.
type sandbox struct {
	name               string
	idempotencyKey     bool          // supports_idempotency_key
	timeoutAfterAccept bool          // timeout_after_accept
	noLookup           bool          // lookup: false
	delay              time.Duration // delay
}

// httpProvider is one provider of kind http of the drill's instance,
// pointing at the outside provider in the drill process.
type httpProvider struct {
	name, url, lookupURL string
	idempotencyKey       bool          // supports_idempotency_key
	timeout              time.Duration // timeout
	lookupSettle         time.Duration // lookup_settle; 0 leaves the default
}

// channel is one inbound channel, auto-approved, sending through provider,
// with quiet period coalesce (0: every message is drafted at once, so the
// fixtures that count per message see one draft each).
type channel struct {
	name, provider string
	coalesce       time.Duration
}

// configYAML is the instance's configuration: the drafter is the fake
// model, retries are fast, and each fixture has its own channel and
// provider (a sandbox, or one of kind http) with the knobs it needs.
func configYAML(modelURL string, channels []channel, providers []sandbox, remotes []httpProvider) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# written by handoff drill
workers: 4
drafter:
  kind: openai
  base_url: %s
  model: drill-model
  prompt_version: drill-1
  timeout: 2s
retry:
  max_attempts: %d
  base_delay: 50ms
  max_delay: 200ms
channels:
`, modelURL, maxAttempts)
	for _, c := range channels {
		fmt.Fprintf(&b, `  - name: %s
    fields: {message_id: /id, conversation_id: /conversation_id}
    provider: %s
    auto_approve: true
    coalesce: %s
`, c.name, c.provider, c.coalesce)
	}
	b.WriteString("providers:\n")
	for _, p := range providers {
		fmt.Fprintf(&b, "  - name: %s\n    kind: sandbox\n", p.name)
		if p.idempotencyKey {
			b.WriteString("    supports_idempotency_key: true\n")
		}
		if p.timeoutAfterAccept {
			b.WriteString("    timeout_after_accept: true\n")
		}
		if p.noLookup {
			b.WriteString("    lookup: false\n")
		}
		if p.delay > 0 {
			fmt.Fprintf(&b, "    delay: %s\n", p.delay)
		}
	}
	for _, p := range remotes {
		fmt.Fprintf(&b, "  - name: %s\n    kind: http\n    url: %s\n", p.name, p.url)
		if p.lookupURL != "" {
			fmt.Fprintf(&b, "    lookup_url: %q\n", p.lookupURL)
		}
		fmt.Fprintf(&b, "    supports_idempotency_key: %t\n", p.idempotencyKey)
		if p.timeout > 0 {
			fmt.Fprintf(&b, "    timeout: %s\n", p.timeout)
		}
		if p.lookupSettle > 0 {
			fmt.Fprintf(&b, "    lookup_settle: %s\n", p.lookupSettle)
		}
	}
	return b.String()
}
