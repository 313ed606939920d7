// Package e2e holds end-to-end tests that build the real handoff binary, run it
// as a child process on a temporary data folder and drive it over HTTP: crash it
// with SIGKILL, stop it with SIGTERM, restart it on the same files, and check
// through the JSON API that nothing acknowledged was lost or duplicated.
//
// Run with: go test -race ./e2e/
package e2e
