package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/handoff/handoff/config"
)

// healthCmd runs `handoff health [--addr HOST:PORT]`: exit 0 when the
// server's /readyz answers 200. The container's health check uses it, so the
// image needs no curl.
func healthCmd(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("health", e)
	addr := fs.String("addr", config.DefaultAddr, "the server's address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	e.override(addr, "HANDOFF_ADDR")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The answer's sentence says why (a full disk names where to
		// free space); the container's health log keeps it.
		var ans struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&ans) == nil && ans.Error != "" {
			return fmt.Errorf("not ready: /readyz answered %s: %s", resp.Status, strings.TrimPrefix(ans.Error, "not ready: "))
		}
		return fmt.Errorf("not ready: /readyz answered %s", resp.Status)
	}
	fmt.Fprintln(e.stdout, "ready")
	return nil
}
