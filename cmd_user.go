package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/users"
)

const userUsage = `usage: handoff user add|passwd|disable|enable|remove|list|change --data DIR [NAME] (server stopped)
  user add     --data DIR NAME --role admin|approver [--owner NAME] [--email ADDRESS] [--config FILE]   (password from stdin or generated)
  user change  --data DIR NAME --email ADDRESS                        (the address approval surfaces know them by; "" removes it)
  user passwd  --data DIR NAME [--reset-second-factor] [--config FILE]                (password from stdin or generated; ends their sessions)
  user disable --data DIR NAME                                        (ends their sessions; their tokens stop working)
  user enable  --data DIR NAME
  user remove  --data DIR NAME                                        (the audit log keeps what they did)
  user list    --data DIR`

// userCmd runs `handoff user SUB ...` with the server stopped: each sub-command
// opens the data folder itself, so a running server (which holds the file)
// makes it fail with "in use" rather than race the server.
func userCmd(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return errors.New(userUsage)
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "add":
		return userAdd(ctx, args, e)
	case "change":
		return userSetEmail(ctx, args, e)
	case "passwd", "disable", "enable", "remove":
		return userChange(ctx, sub, args, e)
	case "list":
		return userList(args, e)
	}
	return errors.New(userUsage)
}

// userArgs parses flags that may come before and after the names (the spec
// writes `user add --data DIR NAME --role R`; the flag package stops at the
// first non-flag, so it parses again after each one).
func userArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names, rest = append(names, fs.Arg(0)), fs.Args()[1:]
	}
}

// oneName is the single NAME a sub-command takes.
func oneName(sub string, names []string) (string, error) {
	if len(names) != 1 {
		return "", fmt.Errorf("user %s needs exactly one NAME, got %d", sub, len(names))
	}
	if !users.ValidName(names[0]) {
		return "", fmt.Errorf("user name %q: use 1 to 64 letters, digits, '.', '_', '-' or '@'", names[0])
	}
	return names[0], nil
}

// openData opens the data folder for one change, with the server stopped.
func openData(dataDir string) (*store.Store, error) {
	return store.Open(dataDir, store.Options{CheckPages: true})
}

func userAdd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("user add", e)
	dataDir := fs.String("data", config.DefaultDataDir, "data folder")
	role := fs.String("role", "approver", "admin or approver")
	owner := fs.String("owner", "", "the routing owner this person works as (their \"mine\" filter)")
	clientList := fs.String("clients", "", "limit an approver to these clients' channels, ids separated by commas (empty: every client)")
	cfgPath := fs.String("config", "", "the server's config file: its clients' names are refused in the password too")
	emailFlag := fs.String("email", "", "the person's email address, by which the approval surfaces (an email reply, Slack) know them")
	names, err := userArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return fmt.Errorf("user add needs exactly one NAME, got %d", len(names))
	}
	email, err := userEmail(*emailFlag)
	if err != nil {
		return err
	}
	clients := users.ParseClients(*clientList)
	if err := users.CheckClientIDs(clients); err != nil {
		return fmt.Errorf("--clients: %w", err)
	}
	e.override(dataDir, "HANDOFF_DATA")
	name, err := oneName("add", names)
	if err != nil {
		return err
	}
	if *role != string(store.RoleAdmin) && *role != string(store.RoleApprover) {
		return fmt.Errorf("--role %q: use admin or approver", *role)
	}
	pw, generated, err := readPassword(e.stdin)
	if err != nil {
		return err
	}
	st, err := openData(*dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	acc, err := cliAccounts(st, *cfgPath, e)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	_, err = acc.Add(ctx, users.Person{Name: name, Role: store.Role(*role), Owner: *owner, Clients: clients, Password: pw}, now,
		store.AuditEntry{At: now, Who: "handoff user add", Action: "create user", Target: name, Detail: *role})
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("a user named %q already exists", name)
	}
	if err != nil {
		return err
	}
	if email != "" {
		if err := setEmail(ctx, st, name, email, now, "handoff user add"); err != nil {
			return fmt.Errorf("created %s, but %w", name, err)
		}
	}
	if generated {
		fmt.Fprintf(e.stdout, "created %s %s with password: %s\n(shown once; it is stored hashed)\n", *role, name, pw)
	} else {
		fmt.Fprintf(e.stdout, "created %s %s\n", *role, name)
	}
	return nil
}

// userEmail is a --email value: a bare address (net/mail), or "".
func userEmail(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	a, err := mail.ParseAddress(v)
	if err != nil || a.Address != v {
		return "", fmt.Errorf("--email %q is not a bare email address (such as dana@example.com)", v)
	}
	return v, nil
}

// errEmailTaken is an address another person has: the surfaces would not
// know which of them a reply is from.
type errEmailTaken struct{ address, other string }

func (e *errEmailTaken) Error() string {
	return fmt.Sprintf("the email %s is %s's already; each person needs an address of their own", e.address, e.other)
}

// setEmail sets name's email ("" removes it) in one write transaction that
// checks no other person has it (in any case), audited in it.
func setEmail(ctx context.Context, st *store.Store, name, email string, now time.Time, who string) error {
	return st.Update(ctx, func(tx *store.Tx) error {
		u, err := tx.User(name)
		if err != nil {
			return err
		}
		if email != "" {
			us, err := tx.Users()
			if err != nil {
				return err
			}
			for _, o := range us {
				if o.Name != name && strings.EqualFold(o.Email, email) {
					return &errEmailTaken{address: email, other: o.Name}
				}
			}
		}
		u.Email = email
		if err := tx.PutUser(u); err != nil {
			return err
		}
		detail := email
		if detail == "" {
			detail = "removed"
		}
		return tx.Audit(store.AuditEntry{At: now, Who: who, Action: "set user email", Target: name, Detail: detail})
	})
}

// userSetEmail runs `user change NAME --email ADDRESS`.
func userSetEmail(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("user change", e)
	dataDir := fs.String("data", config.DefaultDataDir, "data folder")
	emailFlag := fs.String("email", "", "the person's email address (\"\" removes it)")
	names, err := userArgs(fs, args)
	if err != nil {
		return err
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "email" })
	if !set {
		return errors.New("user change needs --email ADDRESS (or --email \"\" to remove it)")
	}
	e.override(dataDir, "HANDOFF_DATA")
	name, err := oneName("change", names)
	if err != nil {
		return err
	}
	email, err := userEmail(*emailFlag)
	if err != nil {
		return err
	}
	st, err := openData(*dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	err = setEmail(ctx, st, name, email, time.Now().UTC(), "handoff user change")
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("there is no user named %q", name)
	}
	if err != nil {
		return err
	}
	if email == "" {
		fmt.Fprintf(e.stdout, "removed the email of %s\n", name)
	} else {
		fmt.Fprintf(e.stdout, "set the email of %s to %s\n", name, email)
	}
	return nil
}

// userChange runs passwd, disable, enable and remove: one write
// transaction each, audited in it, under the same last-admin rule as the
// dashboard.
func userChange(ctx context.Context, sub string, args []string, e env) error {
	fs := newFlagSet("user "+sub, e)
	dataDir := fs.String("data", config.DefaultDataDir, "data folder")
	var (
		resetTOTP *bool
		cfgPath   *string
	)
	if sub == "passwd" {
		resetTOTP = fs.Bool("reset-second-factor", false, "also turn the person's second factor off (a lost authenticator)")
		cfgPath = fs.String("config", "", "the server's config file: its clients' names are refused in the password too")
	}
	names, err := userArgs(fs, args)
	if err != nil {
		return err
	}
	e.override(dataDir, "HANDOFF_DATA")
	name, err := oneName(sub, names)
	if err != nil {
		return err
	}
	var (
		pw        string
		generated bool
	)
	if sub == "passwd" {
		if pw, generated, err = readPassword(e.stdin); err != nil {
			return err
		}
	}
	st, err := openData(*dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := ""
	if cfgPath != nil {
		cfg = *cfgPath
	}
	acc, err := cliAccounts(st, cfg, e)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	audit := store.AuditEntry{At: now, Who: "handoff user " + sub, Target: name}
	var done string
	switch sub {
	case "passwd":
		audit.Action, audit.Detail = "reset password", "every session ended"
		if *resetTOTP {
			audit.Detail += "; second factor off"
		}
		_, err = acc.ResetPassword(ctx, name, pw, *resetTOTP, audit)
		done = "changed the password of " + name
		if generated {
			done += " to: " + pw + "\n(shown once; it is stored hashed)"
		}
	case "disable", "enable":
		audit.Action = sub + " user"
		err = acc.SetDisabled(ctx, name, sub == "disable", audit)
		done = sub + "d " + name
	case "remove":
		audit.Action = "remove user"
		var revoked []store.Token
		revoked, err = acc.Remove(ctx, name, now, audit)
		done = "removed " + name + " (the audit log keeps what they did)"
		switch len(revoked) {
		case 0:
		case 1:
			done += "; revoked their API token " + users.TokenNames(revoked)
		default:
			done += fmt.Sprintf("; revoked their %d API tokens (%s)", len(revoked), users.TokenNames(revoked))
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("there is no user named %q", name)
	case errors.Is(err, users.ErrLastAdmin):
		return fmt.Errorf("%s: %s", name, users.ErrLastAdmin)
	case err != nil:
		return err
	}
	fmt.Fprintln(e.stdout, done)
	return nil
}

// cliAccounts are the dashboard's account rules for the command line: the
// product's name and words are always refused as a password's base; with
// a config file, its clients' ids and names too, and --clients must name
// its clients (without one, only look like client ids).
func cliAccounts(st *store.Store, cfgPath string, e env) (*users.Accounts, error) {
	if cfgPath == "" {
		return users.New(st, users.Options{}), nil
	}
	cfg, err := config.Load(cfgPath, e.getenv)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var words []string
	for _, cl := range cfg.ClientList() {
		words = append(words, cl.ID, cl.Name)
	}
	return users.New(st, users.Options{Words: words, CheckClients: cfg.CheckClients}), nil
}

// userList prints every person: name, role, owner, state, second factor.
func userList(args []string, e env) error {
	fs := newFlagSet("user list", e)
	dataDir := fs.String("data", config.DefaultDataDir, "data folder")
	names, err := userArgs(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 0 {
		return errors.New("user list takes no NAME")
	}
	e.override(dataDir, "HANDOFF_DATA")
	st, err := store.Open(*dataDir, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	users, err := st.Users()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tROLE\tOWNER\tSTATE\tSECOND FACTOR\tCREATED")
	for _, u := range users {
		state, totp := "enabled", "no"
		if u.Disabled {
			state = "disabled"
		}
		if u.TOTP != nil {
			totp = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Name, u.Role, dash(u.Owner), state, totp, u.CreatedAt.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// readPassword takes the first line of stdin when stdin is not a terminal,
// else generates one.
func readPassword(stdin io.Reader) (pw string, generated bool, err error) {
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return password.Generate(), true, nil
		}
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("read the password from stdin: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return password.Generate(), true, nil
	}
	return line, false, nil
}
