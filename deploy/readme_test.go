package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff/handoff/proc"
	"github.com/handoff/handoff/testkit/corpus"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBinary()
	os.Exit(code)
}

// shLines returns the logical lines (continuations joined) of every ```sh
// block of a Markdown file that runs curl, in order, with their line numbers.
func shLines(t *testing.T, path string) (lines []string, at []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var block []string
	var blockAt []int
	in, n, cont := false, 0, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "```sh"):
			in, block, blockAt = true, nil, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			if strings.Contains(strings.Join(block, "\n"), "curl ") {
				lines, at = append(lines, block...), append(at, blockAt...)
			}
		case in:
			if c, ok := strings.CutSuffix(line, "\\"); ok {
				if cont == "" {
					blockAt = append(blockAt, n)
				}
				cont += c
				continue
			}
			if cont == "" {
				blockAt = append(blockAt, n)
			}
			block = append(block, strings.TrimSpace(cont+line))
			cont = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, at
}

// demo is the README's demo as the test drives it.
type demo struct {
	t      *testing.T
	url    string // http://127.0.0.1:PORT
	token  string
	next   int               // numbers the test's own messages
	claims map[string]string // key -> the last claim id
	bulk   string            // the last bulk replay's id
	pool   [][2]string       // drafted leads not yet used: draft id, event key
}

// api calls the demo with the token and decodes a JSON answer into out.
func (d *demo) api(method, path, body string, out any) int {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// draft sends a new message to the demo channel and returns its draft's id
// once the template drafter has written it.
func (d *demo) draft() string {
	d.t.Helper()
	id, _ := d.waiting()
	return id
}

// waiting is draft that also returns the event's key: a lead of its own,
// waiting for a reply. The demo drafts a lead after its 10 s quiet
// period, so leads are made a batch at a time and waited for together.
func (d *demo) waiting() (string, string) {
	d.t.Helper()
	if len(d.pool) == 0 {
		d.pool = d.leads(8)
	}
	l := d.pool[0]
	d.pool = d.pool[1:]
	return l[0], l[1]
}

// leads sends n messages, each from a lead of its own, and returns each
// one's draft id and event key once the template drafter has written them.
// Each message is a corpus body (corpus.Message: consecutive ones differ
// in layout and text), its conversation the contact's.
func (d *demo) leads(n int) [][2]string {
	d.t.Helper()
	out := make([][2]string, n)
	sent := make([]corpus.Body, n)
	for k := range out {
		d.next++
		from := fmt.Sprintf("+1555000%04d", d.next)
		b := corpus.Message(d.next, fmt.Sprintf("readme-%d", d.next), from, from)
		out[k][1], sent[k] = "demo:"+b.Want.MessageID, b
		if code := d.api("POST", "/hooks/demo", string(b.Raw), nil); code != http.StatusAccepted {
			d.t.Fatalf("POST /hooks/demo %s: %d", b.Name(), code)
		}
	}
	err := proc.Eventually(context.Background(), 30*time.Second, func() (bool, error) {
		for k := range out {
			if out[k][0] != "" {
				continue
			}
			var tl struct {
				Event struct {
					Text string `json:"text"`
					Name string `json:"name"`
				} `json:"event"`
				Draft *struct {
					ID string `json:"id"`
				} `json:"draft"`
			}
			if code := d.api("GET", "/api/v1/events/"+out[k][1], "", &tl); code != http.StatusOK {
				return false, fmt.Errorf("GET the timeline of %s: %d", out[k][1], code)
			}
			if w := sent[k].Want; tl.Event.Text != w.Text || tl.Event.Name != w.Name {
				return false, fmt.Errorf("the timeline of %s (%s) shows text %q and name %q, want %q and %q", out[k][1], sent[k].Name(), tl.Event.Text, tl.Event.Name, w.Text, w.Name)
			}
			if tl.Draft == nil {
				return false, nil
			}
			out[k][0] = tl.Draft.ID
		}
		return true, nil
	})
	if err != nil {
		d.t.Fatalf("no draft for every one of %d new leads: %v", n, err)
	}
	return out
}

// approved approves a new draft and returns its id.
func (d *demo) approved() string {
	d.t.Helper()
	id := d.draft()
	if code := d.api("POST", "/api/v1/drafts/"+id+"/approve", "", nil); code != http.StatusOK {
		d.t.Fatalf("approve: %d", code)
	}
	return id
}

// outbox approves a new draft and returns its outbox id.
func (d *demo) outbox() string {
	d.t.Helper()
	var a struct {
		OutboxID string `json:"outbox_id"`
	}
	if code := d.api("POST", "/api/v1/drafts/"+d.draft()+"/approve", "", &a); code != http.StatusOK {
		d.t.Fatalf("approve: %d", code)
	}
	return a.OutboxID
}

var (
	endsLead       = regexp.MustCompile(`/api/v1/events/([^/\s]+)/(reply|redraft|close)\b`)
	keyRoute       = regexp.MustCompile(`/api/v1/keys/([^/?"\s]+)/(claim|reconcile|effect-pending|complete)`)
	nothingOnDemo  = regexp.MustCompile(`/api/v1/(dead-letters/<[^>]+>|reconcile/<outbox id>)`)
	statusLine     = regexp.MustCompile(`(?m)^@@status (\d{3})$`)
	placeholderAny = regexp.MustCompile(`<[a-z ]+>|01K…`)
)

// fill replaces the placeholders of one README line with what the demo
// holds, and says which status the line must answer: 2xx, or 404 for a
// route that names what the demo never has (a dead letter, a row that
// needs reconciling; its sandbox never fails).
func (d *demo) fill(line string) (string, bool) {
	if nothingOnDemo.MatchString(line) && !strings.Contains(line, "/bulk/") {
		line = strings.NewReplacer("<draft job id>", "01NOSUCHJOB", "<id>", "01NOSUCHJOB", "<outbox id>", url.PathEscape("+1555:dNOSUCHDRAFT")).Replace(line)
		return line, true
	}
	if m := endsLead.FindStringSubmatch(line); m != nil {
		// Each of these ends a lead that waits for a reply; the README
		// shows them as alternatives, so each gets a waiting lead of its own.
		_, key := d.waiting()
		line = strings.Replace(line, "/api/v1/events/"+m[1]+"/", "/api/v1/events/"+key+"/", 1)
	}
	if strings.Contains(line, "<approved draft id>") {
		line = strings.ReplaceAll(line, "<approved draft id>", d.approved()) // inside the demo's undo_window
	}
	for strings.Contains(line, "<draft id>") {
		line = strings.Replace(line, "<draft id>", d.draft(), 1)
	}
	if strings.Contains(line, "<outbox id>") {
		line = strings.ReplaceAll(line, "<outbox id>", url.PathEscape(d.outbox()))
	}
	line = strings.ReplaceAll(line, "<bulk id>", d.bulk)
	if m := keyRoute.FindStringSubmatch(line); m != nil {
		key := m[1]
		if m[2] == "reconcile" && d.claims[key] == "" {
			// The README's words before these lines: a key whose side
			// effect's outcome is unknown, so claimed and effect-pending.
			var c struct {
				Claim string `json:"claim"`
			}
			if code := d.api("POST", "/api/v1/keys/"+key+"/claim", `{}`, &c); code != http.StatusCreated {
				d.t.Fatalf("claim %s: %d", key, code)
			}
			if code := d.api("POST", "/api/v1/keys/"+key+"/effect-pending?claim="+c.Claim, "", nil); code != http.StatusOK {
				d.t.Fatalf("effect-pending %s: %d", key, code)
			}
			d.claims[key] = c.Claim
		}
		line = strings.ReplaceAll(line, "01K…", d.claims[key])
	}
	return line, false
}

// learn keeps the ids a line's answer hands to the lines after it.
func (d *demo) learn(line, body string) {
	var v struct {
		Claim string `json:"claim"`
		ID    string `json:"id"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &v) != nil {
		return
	}
	if m := keyRoute.FindStringSubmatch(line); m != nil && m[2] == "claim" && v.Claim != "" {
		d.claims[m[1]] = v.Claim
	}
	if strings.Contains(line, "/dead-letters/replay") && v.ID != "" {
		d.bulk = v.ID
	}
}

// TestREADMECurlExamples runs every curl line of the README's ```sh
// blocks, in order, against the demo started the way the quick start
// says (with the token it exports), and wants each answer 2xx: the
// examples a reader copies must work. The placeholders are filled from
// what the demo holds; the routes that name a dead letter or a row to
// reconcile must answer 404 there, as the README says.
func TestREADMECurlExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the README's examples use it")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed: the README's quick start makes the token with it")
	}
	readme := filepath.Join(repoRoot(t), "README.md")
	lines, at := shLines(t, readme)

	// The quick start's token, made by its own command.
	var token string
	for _, l := range lines {
		if strings.HasPrefix(l, "export HANDOFF_API_TOKEN=") {
			out, err := exec.Command("bash", "-c", l+"\n"+`printf %s "$HANDOFF_API_TOKEN"`).Output()
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			token = string(out)
		}
	}
	if len(token) < 32 {
		t.Fatalf("the README's quick start exports no HANDOFF_API_TOKEN of 32 characters or more (got %q)", token)
	}

	bin, err := proc.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst := &proc.Instance{Binary: bin, Dir: t.TempDir(), Env: []string{"HANDOFF_API_TOKEN=" + token}}
	p, err := inst.Start(ctx) // the demo: no config
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(30 * time.Second)
	d := &demo{t: t, url: p.URL(), token: token, claims: map[string]string{}}

	// Every curl call prints its status after its body.
	prelude := `curl() { command curl -w '\n@@status %{http_code}\n' "$@"; }` + "\n"
	addr := strings.NewReplacer("http://127.0.0.1:8080", p.URL(), "localhost:8080", p.Addr(), "127.0.0.1:8080", p.Addr())
	work := t.TempDir()
	ran := 0
	for i, l := range lines {
		switch {
		case l == "" || strings.HasPrefix(l, "#"), strings.HasPrefix(l, "export HANDOFF_API_TOKEN="), strings.HasPrefix(l, "go run "):
			continue
		case !strings.Contains(l, "curl "):
			prelude += addr.Replace(l) + "\n" // T=…; H=…
			continue
		}
		line, want404 := d.fill(addr.Replace(l))
		if placeholderAny.MatchString(line) {
			t.Fatalf("README.md:%d: a placeholder the test cannot fill: %s", at[i], l)
		}
		cmd := exec.CommandContext(ctx, "bash", "-c", prelude+line)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "HANDOFF_API_TOKEN="+token)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("README.md:%d: %s: %v\n%s", at[i], l, err, out.String())
			continue
		}
		statuses := statusLine.FindAllStringSubmatch(out.String(), -1)
		if len(statuses) != strings.Count(line, "curl ") {
			t.Errorf("README.md:%d: %d answers for %d curl calls:\n%s", at[i], len(statuses), strings.Count(line, "curl "), out.String())
		}
		for _, s := range statuses {
			code, _ := strconv.Atoi(s[1])
			switch {
			case want404 && code != http.StatusNotFound:
				t.Errorf("README.md:%d: %s answered %d on the demo, want 404 (it has none of those):\n%.500s", at[i], l, code, out.String())
			case !want404 && (code < 200 || code > 299):
				t.Errorf("README.md:%d: %s answered %d, want 2xx:\n%.500s", at[i], l, code, out.String())
			}
		}
		d.learn(line, statusLine.ReplaceAllString(out.String(), ""))
		ran++
	}
	if ran < 20 {
		t.Errorf("ran %d curl lines of the README; want the quick start's and the API's (20 or more)", ran)
	}
	t.Logf("ran %d curl lines of README.md against the demo", ran)
}
