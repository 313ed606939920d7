package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/handoff/handoff/drill"
)

// drillCmd runs the duplicate, burst, timeout, crash, replay, dropped-connection
// and slow-provider fixtures against a
// fresh temporary instance of this very binary; it fails unless all pass.
func drillCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("drill", e)
	keep := fs.Bool("keep", false, "keep the temporary folder and the instance's log, and print where")
	// Hidden: sabotages one fixture's instance so a test can prove that the
	// drill fails when the product misbehaves.
	sabotage := fs.String("break", "", "")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: handoff drill [--keep]")
		fmt.Fprintln(e.stderr, "  --keep   keep the temporary folder and the instance's log, and print where")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("drill takes no arguments, got %q", fs.Args())
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("drill: find this binary: %w", err)
	}
	ok, err := drill.Run(ctx, drill.Options{Binary: bin, Keep: *keep, Break: *sabotage, Out: e.stdout})
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("drill: some fixtures failed (see the table above)")
	}
	return nil
}
