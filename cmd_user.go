package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
	"github.com/handoff/handoff/password"
	"github.com/handoff/handoff/store"
	"github.com/handoff/handoff/web"
)

// userCmd runs `handoff user add --data DIR NAME --role admin|approver [--owner NAME]`
// with the server stopped; the password comes from stdin or is generated.
func userCmd(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] != "add" {
		return errors.New("usage: handoff user add --data DIR NAME --role admin|approver [--owner NAME]")
	}
	fs := newFlagSet("user add", e)
	dataDir := fs.String("data", config.DefaultDataDir, "data folder")
	role := fs.String("role", "approver", "admin or approver")
	owner := fs.String("owner", "", "the routing owner this person works as (their \"mine\" filter)")
	// Flags may come before and after NAME (the spec writes
	// `user add --data DIR NAME --role R`); the flag package stops at the
	// first non-flag, so parse again after each one.
	var names []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names, rest = append(names, fs.Arg(0)), fs.Args()[1:]
	}
	if len(names) != 1 {
		return fmt.Errorf("user add needs exactly one NAME, got %d", len(names))
	}
	name := names[0]
	e.override(dataDir, "HANDOFF_DATA")
	if !web.ValidName(name) {
		return fmt.Errorf("user name %q: use 1 to 64 letters, digits, '.', '_', '-' or '@'", name)
	}
	if *role != string(store.RoleAdmin) && *role != string(store.RoleApprover) {
		return fmt.Errorf("--role %q: use admin or approver", *role)
	}
	pw, generated, err := readPassword(e.stdin)
	if err != nil {
		return err
	}
	hash, err := password.Hash(pw)
	if err != nil {
		return err
	}
	st, err := store.Open(*dataDir, store.Options{CheckPages: true})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC()
	err = st.CreateUser(ctx, store.User{Name: name, Role: store.Role(*role), PasswordHash: hash, Owner: *owner, CreatedAt: now},
		store.AuditEntry{At: now, Who: "handoff user add", Action: "create user", Target: name, Detail: *role})
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("a user named %q already exists", name)
	}
	if err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(e.stdout, "created %s %s with password: %s\n(shown once; it is stored hashed)\n", *role, name, pw)
	} else {
		fmt.Fprintf(e.stdout, "created %s %s\n", *role, name)
	}
	return nil
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
