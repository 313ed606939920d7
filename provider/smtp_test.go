package provider_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/provider"
	"github.com/handoff/handoff/testkit"
)

// smtpConfig is an smtp provider sending to addr (host:port) in clear
// text, looking messages up in mp.
func smtpConfig(t *testing.T, addr string, mp testkit.Mailpit) config.Provider {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p := config.Provider{Name: "mail", Kind: "smtp", Timeout: 2 * time.Second, LookupURL: mp.LookupURL()}
	p.Host, p.TLS, p.From, p.Username, p.Password = host, "none", "Agency <hello@agency.example>", "u", "p"
	p.Port, _ = strconv.Atoi(port)
	return p
}

// TestSMTPAgainstMailpit sends through a real SMTP server: the message
// arrives once with the Message-ID derived from our reference, a lookup
// by that Message-ID finds it, and a reference never sent is not found.
func TestSMTPAgainstMailpit(t *testing.T) {
	mp := testkit.StartMailpit(t)
	p := openKind(t, smtpConfig(t, mp.SMTP, mp))
	m := provider.Message{Ref: "lead+1:01HZX", To: "Ada <ada@lead.example>", Text: "Thanks, we will call you today.\nAgency", Subject: "Prices"}
	id, err := p.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if want := provider.MessageID(m.Ref, "agency.example"); id != want {
		t.Fatalf("id %q, want the Message-ID %q", id, want)
	}
	msgs := mp.Messages(t)
	if len(msgs) != 1 || msgs[0].MessageID != id || msgs[0].Subject != "Re: Prices" || msgs[0].To[0].Address != "ada@lead.example" || msgs[0].From.Address != "hello@agency.example" {
		t.Fatalf("mailpit holds %+v, want one message %s to ada@lead.example, subject Re: Prices", msgs, id)
	}
	got, found, err := p.Lookup(context.Background(), m.Ref, "")
	if err != nil || !found || got != id {
		t.Fatalf("Lookup = %q, %v, %v; want %q found", got, found, err, id)
	}
	if _, found, err := p.Lookup(context.Background(), "never-sent", ""); err != nil || found {
		t.Fatalf("Lookup(never-sent) = %v, %v; want not found", found, err)
	}
}

// TestSMTPCutAfterData: the connection dies right after DATA's final dot,
// before the server's 250 comes back. The server has the message; the
// send is ambiguous (never "not sent"); the lookup finds it, so no second
// message is ever needed.
func TestSMTPCutAfterData(t *testing.T) {
	mp := testkit.StartMailpit(t)
	cut := testkit.StartSMTPCut(t, mp.SMTP)
	p := openKind(t, smtpConfig(t, cut.Addr, mp))
	m := provider.Message{Ref: "c1:01HZ", To: "ada@lead.example", Text: "hello"}
	_, err := p.Send(context.Background(), m)
	var amb *provider.Ambiguous
	if !errors.As(err, &amb) || cut.Cuts() != 1 {
		t.Fatalf("Send = %v (%T) after %d cuts, want *Ambiguous after one cut", err, err, cut.Cuts())
	}
	var id string
	testkit.Eventually(t, 10*time.Second, func() bool {
		var found bool
		id, found, err = p.Lookup(context.Background(), m.Ref, "")
		return err == nil && found
	}, "the lookup to find the message")
	if msgs := mp.Messages(t); len(msgs) != 1 || msgs[0].MessageID != id {
		t.Fatalf("mailpit holds %+v, want exactly the one message %s", msgs, id)
	}
}

// TestSMTPRefusals: a 5xx at RCPT is permanent; nothing listening is not sent.
func TestSMTPRefusals(t *testing.T) {
	mp := testkit.StartMailpit(t, "--smtp-allowed-recipients", `@lead\.example$`)
	p := openKind(t, smtpConfig(t, mp.SMTP, mp))
	_, err := p.Send(context.Background(), provider.Message{Ref: "r1", To: "someone@elsewhere.example", Text: "x"})
	var perm *provider.Permanent
	if !errors.As(err, &perm) {
		t.Fatalf("Send to a refused recipient = %v (%T), want *Permanent", err, err)
	}
	if n := len(mp.Messages(t)); n != 0 {
		t.Fatalf("mailpit holds %d messages, want 0", n)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err = openKind(t, smtpConfig(t, addr, mp)).Send(context.Background(), provider.Message{Ref: "r2", To: "a@lead.example", Text: "x"})
	var ns *provider.NotSent
	if !errors.As(err, &ns) {
		t.Fatalf("Send to nothing = %v (%T), want *NotSent", err, err)
	}
}
