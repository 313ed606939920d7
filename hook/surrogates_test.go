package hook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"unicode/utf16"

	"github.com/handoff/handoff/testkit/corpus"
)

// markLoneSurrogatesWalk is markLoneSurrogates as it was before its
// shortcut (mayEscapeSurrogate): the walk of every byte, kept as the
// reference the shortcut must agree with.
func markLoneSurrogatesWalk(body []byte) []byte {
	var out []byte
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			if i+6 > len(body) || body[i+1] != 'u' {
				i++
				continue
			}
			r := hex4(body[i+2 : i+6])
			if !utf16.IsSurrogate(r) {
				i += 5
				continue
			}
			if r < 0xdc00 && i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
				if lo := hex4(body[i+8 : i+12]); 0xdc00 <= lo && lo <= 0xdfff {
					i += 11
					continue
				}
			}
			if out == nil {
				out = bytes.Clone(body)
			}
			copy(out[i+2:i+6], "0000")
			i += 5
		}
	}
	return out
}

// surrogateSeeds: bodies with and without surrogate escapes, lone and
// paired, upper and lower case, escaped backslashes, a \u at the very end.
var surrogateSeeds = []string{
	`{"id":"plain é"}`, `{"id":"\ud83d\ude00"}`, `{"id":"\\ud800"}`, `{"id":"\"\ud800"}`,
	`{"id":"u-\ud800"}`, `{"id":"u-\uDFFF"}`, `["\ud800\u0041"]`, `["\ud800\ud800\udc00"]`,
	`["\udbff","\udc00"]`, `{"\udc00":1}`, `{"a":"\u00e9\u0041"}`, `"\u`, `"\ud`, `"\u0041\uD83D\uDE00"`,
	`{"text":"fish \u0026 chips \u003c\u003e"}`,
}

// TestMarkLoneSurrogatesCorpus: on every JSON body of the shared corpus
// and the seeds, markLoneSurrogates marks exactly what the byte walk marks,
// and Parse's proof (Payload.Valid) is of the body itself.
func TestMarkLoneSurrogatesCorpus(t *testing.T) {
	bodies := [][]byte{}
	for _, s := range surrogateSeeds {
		bodies = append(bodies, []byte(s))
	}
	for _, b := range corpus.All() {
		if b.IsJSON() {
			bodies = append(bodies, b.Raw)
		}
	}
	for _, body := range bodies {
		if got, want := markLoneSurrogates(body), markLoneSurrogatesWalk(body); !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("markLoneSurrogates(%.80q) = %q, the walk %q", body, got, want)
		}
		if !json.Valid(body) {
			continue
		}
		p, err := Parse(jsonType, body, http.Header{})
		if err != nil {
			t.Errorf("Parse(%.80q): %v", body, err)
			continue
		}
		if !p.Valid().Of(body) {
			t.Errorf("Parse(%.80q) gives no proof of the body", body)
		}
	}
}

// TestParseProofOnlyForJSON: a form or multipart body, whose stored form
// is not the body (or not JSON), carries no proof; a refused body none.
func TestParseProofOnlyForJSON(t *testing.T) {
	for _, b := range corpus.All() {
		if b.IsJSON() {
			continue
		}
		p, err := Parse(b.ContentType, b.Raw, http.Header{})
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		if p.Valid().Bytes() != nil {
			t.Errorf("%s (%s) carries a JSON proof", b.Name(), b.ContentType)
		}
	}
	if p, err := Parse(jsonType, []byte(`{"id":1} {"id":2}`), http.Header{}); err == nil || p != nil {
		t.Errorf("two values parsed: %v", err)
	}
}

// FuzzMarkLoneSurrogates: for any body, the shortcut changes nothing.
func FuzzMarkLoneSurrogates(f *testing.F) {
	for _, s := range surrogateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, want := markLoneSurrogates(body), markLoneSurrogatesWalk(body)
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("markLoneSurrogates(%q) = %q, the walk %q", body, got, want)
		}
	})
}

// BenchmarkMarkLoneSurrogates: the corpus's longest JSON body, which
// escapes no surrogate, with the shortcut and with the walk.
func BenchmarkMarkLoneSurrogates(b *testing.B) {
	var body []byte
	for _, c := range corpus.All() {
		if c.IsJSON() && len(c.Raw) > len(body) {
			body = c.Raw
		}
	}
	for name, fn := range map[string]func([]byte) []byte{"shortcut": markLoneSurrogates, "walk": markLoneSurrogatesWalk} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				_ = fn(body)
			}
		})
	}
}
