package hook

import (
	"net/http"
	"testing"
)

// TestEmailPresetsReadTheSubject: each email preset's subject source reads
// the subject from the request its provider's SDK made, and the other
// presets read none.
func TestEmailPresetsReadTheSubject(t *testing.T) {
	want := map[string]string{"sendgrid inbound parse": "Quote request", "mailgun route": "Re: your offer", "postmark inbound": "Test subject"}
	seen := 0
	for _, v := range loadVectors(t).Vectors {
		p, ok := LookupPreset(v.Preset)
		if !ok {
			continue
		}
		w, isEmail := want[v.Name]
		if !isEmail {
			if p.Fields.Subject != "" && v.Preset != "sendgrid" && v.Preset != "mailgun" && v.Preset != "postmark" {
				t.Errorf("preset %s reads a subject (%s); only the email presets do", v.Preset, p.Fields.Subject)
			}
			continue
		}
		seen++
		h := http.Header{}
		for k, x := range v.Headers {
			h.Set(k, x)
		}
		pl, err := Parse(h.Get("Content-Type"), []byte(v.Body), h)
		if err != nil {
			t.Fatalf("%s: Parse: %v", v.Name, err)
		}
		got, ok, err := pl.Field(p.Fields.Subject)
		if err != nil || !ok || got != w {
			t.Errorf("%s: subject at %s = %q, %v, %v; want %q", v.Name, p.Fields.Subject, got, ok, err, w)
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of the %d email vectors", seen, len(want))
	}
}
