package quality

import (
	"slices"
	"strings"
	"testing"

	"github.com/handoff/handoff/testkit/corpus"
)

const salonFacts = `Prices: haircut €35, colour from 1,200.00 EUR (a full day), beard trim 12,50 €.
Open Mon–Fri 9:00–17:30, Saturdays until 1pm. Closed on 24 December.
Call +44 20 7946 0958 or book at https://salon.example/book. Deposit: 20%.`

func texts(fs []Figure) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Kind+" "+f.Text)
	}
	return out
}

// A figure the facts or the conversation hold is never flagged, however
// it is written: the guard's first promise.
func TestUnsupportedHeldFiguresAreNotFlagged(t *testing.T) {
	for _, draft := range []string{
		"A haircut is 35 EUR and colour 1200 €; a beard trim €12.50.",
		"We're open until 5:30pm, on Saturdays until 13:00. Call 020 7946 0958 or book at salon.example/book.",
		"Book at https://SALON.example/book/ — a deposit of 20 % holds the slot. We are closed on December 24th.",
		"Colour is 1.200,00 EUR. See you at 09:00!",
		"Thanks Ada, I have noted your number +1 555 0100 and we will call you on 555 0100.",
		"Table for 4 at the usual spot (draft #12), 2 people confirmed.",
	} {
		got := Unsupported(draft, salonFacts, "Hi, I'm Ada, call me on +1 555 0100", "+15550100")
		if len(got) != 0 {
			t.Errorf("Unsupported(%q) = %q, want none: every figure is in the facts or the conversation", draft, texts(got))
		}
	}
}

func TestUnsupportedInventedFiguresAreFlagged(t *testing.T) {
	draft := "A haircut is €45 (or $35), colour 950.00 EUR, and we open at 8am on 12 March. Or at 7 p.m. on March 3rd, 2027. " +
		"Call 0800 123 4567 or visit https://other.example/deals, 10% off, write to deals@other.example. Until 6pm."
	want := []string{"price €45", "price $35", "price 950.00 EUR", "time 8am", "date 12 March", "time 7 p.m.", "date March 3rd, 2027", "phone 0800 123 4567",
		"url https://other.example/deals", "percent 10%", "email deals@other.example", "time 6pm"}
	got := texts(Unsupported(draft, salonFacts))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Unsupported flagged\n %q\nwant\n %q", got, want)
	}
}

// The corpus's texts as the conversation: a reply that repeats the
// customer's URL (with & and a query) or their numbers is not flagged;
// one that adds a price is, and the figure is written as in the draft.
func TestUnsupportedOverCorpusTexts(t *testing.T) {
	for _, tx := range corpus.Texts() {
		t.Run(tx.Name, func(t *testing.T) {
			reply := "About your message: " + tx.Body
			if got := Unsupported(reply, "", tx.Body); len(got) != 0 {
				t.Errorf("a reply quoting the customer flags %q", texts(got))
			}
			got := Unsupported(reply+" That is €19.99 & <b>free</b> delivery.", "", tx.Body)
			if len(got) != 1 || got[0].Text != "€19.99" || !strings.Contains(reply+" That is €19.99", got[0].Text) {
				t.Errorf("an invented price flags %q, want just €19.99", texts(got))
			}
		})
	}
}

func TestValues(t *testing.T) {
	for in, want := range map[string][]string{
		"1,200.00": {"1200"}, "1.200,00": {"1200"}, "1200": {"1200"}, "12,50": {"1250", "12.5"}, "1.200": {"1200", "1.2"}, "1 200": {"1200"},
	} {
		if got := values(in); !slices.Equal(got, want) {
			t.Errorf("values(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnsupportedVerbatim: a figure written in a source as the draft
// writes it is held even where the source's own scan reads that text as
// other figures (the fuzzer's case: a price cut a phone number out of the
// facts otherwise than out of the draft); never inside a longer number.
func TestUnsupportedVerbatim(t *testing.T) {
	odd := "!Aaaaaa ba CHF 0!000.00 aaa 0.0000000₮00000000000000000000000000–00000"
	if got := Unsupported(odd, odd); len(got) != 0 {
		t.Errorf("a draft that is its facts word for word: %+v flagged", got)
	}
	for _, tc := range []struct{ draft, source string }{
		{"It is €4.", "It is €45."},
		{"Call 020 7946 095", "Call 020 7946 0958"},
		{"on 1/2/26", "on 11/2/26"},
	} {
		if got := Unsupported(tc.draft, tc.source); len(got) != 1 {
			t.Errorf("%q against %q: %+v, want its figure flagged", tc.draft, tc.source, got)
		}
	}
}
