package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// This file reads a running target from outside: its /metrics page and its
// /proc status. The sustained and footprint modes share it.

// sample is one metric line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is one scrape of /metrics.
type metrics []sample

// parseMetrics reads the Prometheus text exposition format: comments and
// blank lines are skipped, a trailing timestamp is ignored, and label
// values are unescaped (\\, \", \n). A line that does not parse is an error,
// so a changed format fails loudly instead of reading as zero.
func parseMetrics(r io.Reader) (metrics, error) {
	var out metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " \t,")
			if line == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if line[0] == '}' {
				line = line[1:]
				break
			}
			eq := strings.IndexByte(line, '=')
			if eq <= 0 || len(line) < eq+2 || line[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			key := strings.TrimSpace(line[:eq])
			val, rest, err := unquoteLabel(line[eq+2:])
			if err != nil {
				return s, err
			}
			s.labels[key], line = val, rest
		}
	}
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("want a value and at most a timestamp")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// unquoteLabel reads a label value up to its closing quote (the opening one
// already consumed) and returns it with the rest of the line.
func unquoteLabel(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 == len(s) {
				return "", "", fmt.Errorf("unterminated escape")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			default: // \\ and \"
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated label value")
}

// sum adds the values of every sample named name whose labels include all
// of want; ok is false when no sample matched (the metric does not exist yet:
// a counter vector has no line before its first increment).
func (m metrics) sum(name string, want map[string]string) (total float64, ok bool) {
next:
	for _, s := range m {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		ok = true
	}
	return total, ok
}

// has says whether any sample is named name.
func (m metrics) has(name string) bool {
	for _, s := range m {
		if s.name == name {
			return true
		}
	}
	return false
}

// openJobs is how many jobs of kinds are still waiting or running
// (available, retryable or running), from handoff_jobs.
func (m metrics) openJobs(kinds ...string) float64 {
	open := 0.0
	for _, kind := range kinds {
		for _, state := range []string{"available", "retryable", "running"} {
			v, _ := m.sum("handoff_jobs", map[string]string{"kind": kind, "state": state})
			open += v
		}
	}
	return open
}

// openDraftJobs scrapes base's /metrics with token and says how many
// draft jobs are still waiting or running.
func openDraftJobs(ctx context.Context, client *http.Client, base, token string) (float64, error) {
	m, _, err := scrape(ctx, client, base+"/metrics", token)
	if err != nil {
		return 0, err
	}
	return m.openJobs("draft"), nil
}

// scrape fetches and parses url (a /metrics page) and says how long it
// took. token, when not empty, is sent as the bearer token: the main
// listener's /metrics needs one (a metrics_addr listener does not).
func scrape(ctx context.Context, client *http.Client, url, token string) (metrics, time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	return m, time.Since(start), err
}

// memory is what /proc/<pid>/status says about a process's memory.
type memory struct {
	rss, hwm int64 // bytes: resident now (VmRSS) and its peak (VmHWM)
	// anon and file split rss (RssAnon, RssFile; Linux 4.5+, else 0): the
	// heap and stacks, and the pages of mapped files, such as bbolt's
	// mmap of the database, which the kernel can drop and read again.
	anon, file int64
}

// parseProcStatus reads VmRSS, VmHWM, RssAnon and RssFile from the text of
// /proc/<pid>/status ("VmRSS:     12345 kB"). The first two must be there.
func parseProcStatus(text string) (memory, error) {
	var m memory
	var seen int
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	for line := range strings.Lines(text) {
		key, rest, ok := strings.Cut(line, ":")
		dst := fields[key]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("%s: unexpected %q", key, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", key, err)
		}
		*dst = kb << 10
		if key == "VmRSS" || key == "VmHWM" {
			seen++
		}
	}
	if seen != 2 {
		return m, fmt.Errorf("VmRSS or VmHWM missing from the status")
	}
	return m, nil
}

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	return parseProcStatus(string(b))
}
