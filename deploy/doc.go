// Package deploy holds no code, only the tests of what an operator follows
// from outside the program: the container image the Dockerfile describes,
// the systemd unit, the example configuration and the README's commands.
// Each builds or starts the real binary; a check this machine cannot make
// (no Docker engine, no systemd-analyze, not root) is skipped with the
// reason, never faked.
package deploy
