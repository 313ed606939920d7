package jsonbody_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/handoff/handoff/jsonbody"
	"github.com/handoff/handoff/testkit/corpus"
)

// checkProof: what Decode proves is what the store's json.Valid would
// have said; a body Decode refuses gets no proof.
func checkProof(t *testing.T, body []byte) {
	t.Helper()
	doc, v, err := jsonbody.Decode(body)
	if err != nil {
		if v.Bytes() != nil || v.Of(body) || doc != nil {
			t.Fatalf("Decode(%q) failed (%v) and still gave %v, a proof %v", body, err, doc, v.Bytes() != nil)
		}
		return
	}
	if !json.Valid(body) {
		t.Fatalf("Decode(%q) proved a body json.Valid refuses", body)
	}
	if !v.Of(body) || !bytes.Equal(v.Bytes(), body) {
		t.Fatalf("Decode(%q): the proof is not of the body", body)
	}
	if cp := bytes.Clone(body); v.Of(cp) {
		t.Fatalf("a proof of %q is taken for its copy", body)
	}
	if len(body) > 1 && v.Of(body[:len(body)-1]) {
		t.Fatalf("a proof of %q is taken for a prefix of it", body)
	}
}

// TestDecodeCorpus: every JSON body of the shared corpus decodes with a
// proof of itself, and json.Valid agrees.
func TestDecodeCorpus(t *testing.T) {
	n := 0
	for _, b := range corpus.All() {
		if !b.IsJSON() {
			continue
		}
		n++
		if _, _, err := jsonbody.Decode(b.Raw); err != nil {
			t.Errorf("%s: %v", b.Name(), err)
		}
		checkProof(t, b.Raw)
	}
	if n == 0 {
		t.Fatal("the corpus has no JSON body")
	}
}

// TestDecodeRefuses: what is not exactly one JSON value gets no proof.
func TestDecodeRefuses(t *testing.T) {
	for _, body := range []string{"", " ", "{", `{"a":1}{"b":2}`, `{"a":1} x`, `[1,]`, `{"a":1}]`, `{"a":1},`, "\ufeff{}", `"\u12"`, "{\"a\":\"\x01\"}", `nul`} {
		_, v, err := jsonbody.Decode([]byte(body))
		if err == nil || v.Bytes() != nil {
			t.Errorf("Decode(%q) = proof %v, err %v; want an error and no proof", body, v.Bytes() != nil, err)
		}
		checkProof(t, []byte(body))
	}
	if _, _, err := jsonbody.Decode([]byte(`{} {}`)); !errors.Is(err, jsonbody.ErrTrailing) {
		t.Errorf("two values: %v, want ErrTrailing", err)
	}
	if (jsonbody.Valid{}).Of(nil) || (jsonbody.Valid{}).Of([]byte{}) {
		t.Error("the zero Valid proves something")
	}
}

// FuzzDecodeProof: for any bytes, a proof is only ever given for a body
// json.Valid accepts, and only for those bytes.
func FuzzDecodeProof(f *testing.F) {
	for _, b := range corpus.Sample(corpus.Demo, 8) {
		f.Add(b.Raw)
	}
	for _, s := range []string{`{}`, ` [1, 2.5e3, "\ud800", null] `, `{"a":1}{`, "{\"a\":\"\xff\"}", `"x" "y"`, "\t\n0\n", `{"a":"\u2028<>&"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkProof(t, body) })
}

// BenchmarkDecode is the parser's one scan that now stands for the
// store's json.Valid as well, beside that scan, on the corpus's longest
// JSON body.
func BenchmarkDecode(b *testing.B) {
	var body []byte
	for _, c := range corpus.All() {
		if c.IsJSON() && len(c.Raw) > len(body) {
			body = c.Raw
		}
	}
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, _, err := jsonbody.Decode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
