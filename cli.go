package main

import (
	"context"
	"fmt"
	"strings"
)

// helpText is the command list that help and an unknown command print.
const helpText = `usage:
  handoff [serve]   --config FILE --data DIR --addr HOST:PORT
  handoff backup    --url URL --token TOKEN -o FILE     (from a running server)
  handoff restore   --data DIR FILE                     (server stopped; verifies first, keeps the old file)
  handoff verify    FILE                                (bbolt structure, schema version, indexes agree with records)
  handoff user add  --data DIR NAME --role admin|approver [--owner NAME]   (password from stdin or generated)
  handoff user passwd|disable|enable|remove --data DIR NAME; handoff user list --data DIR   (server stopped)
  handoff drill     [--keep]                            (duplicate, timeout, crash, replay, dropped-connection and slow-provider fixtures against a temporary instance)
  handoff eval      --out DIR [--config FILE] [--data DIR | --db FILE | --url URL] [--client ID] [--channel NAME]
                    [--since DATE] [--until DATE] [--sample N] [--seed N] [--prompt FILE] [--model NAME] [--facts FILE]
                    [--label NAME] [--budget AMOUNT] [--concurrency N]
                    (re-drafts a sample of approved turns with a candidate, never sending; resumes in DIR)
  handoff migrate   --data DIR | --db FILE | --config FILE --to postgres://…   (server stopped; into an empty database, then verified)
  handoff migrate   --from postgres://… | --config FILE --to FILE   (server stopped; into a new bbolt file, then verified)
  handoff health    --addr HOST:PORT                    (exit 0 when the server is ready; for health checks)
  handoff version                                       (release, database schema, build)
environment: HANDOFF_CONFIG, HANDOFF_DATA, HANDOFF_ADDR override the flags;
HANDOFF_ADMIN_PASSWORD sets the first admin's password (else a one-time setup link is printed);
HANDOFF_API_TOKEN is accepted as an admin bearer token.`

// run dispatches a sub-command.
func run(ctx context.Context, args []string, e env) error {
	cmd := "serve"
	switch {
	case len(args) > 0 && isHelp(args[0]):
		// Asks for the command list, not for serve's flags.
		cmd, args = "help", args[1:]
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, e)
	case "verify":
		return verify(args, e)
	case "user":
		return userCmd(ctx, args, e)
	case "backup":
		return backupCmd(ctx, args, e)
	case "restore":
		return restoreCmd(ctx, args, e)
	case "health":
		return healthCmd(ctx, args, e)
	case "drill":
		return drillCmd(ctx, args, e)
	case "eval":
		return evalCmd(ctx, args, e)
	case "migrate":
		return migrateCmd(ctx, args, e)
	case "version":
		return versionCmd(e)
	case "help":
		fmt.Fprintln(e.stdout, helpText)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, helpText)
}

// isHelp reports whether arg is one of the flag package's help flags.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}
