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

// channel is one inbound channel, auto-approved, sending through provider.
type channel struct {
	name, provider string
}

// configYAML is the instance's configuration: the drafter is the fake
// model, retries are fast, and each fixture has its own channel and
// sandbox provider with the knobs it needs.
func configYAML(modelURL string, channels []channel, providers []sandbox) string {
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
`, c.name, c.provider)
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
	return b.String()
}
