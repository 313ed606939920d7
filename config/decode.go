package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The file is walked as a yaml.Node tree rather than decoded into tagged
// structs: that is what lets every error name its key path (channels[1].name),
// refuse unknown and repeated keys, tell an omitted key from one set to a
// default, and phrase type errors without echoing values that may be secrets.

// fieldError is one problem with the file. line orders the errors as they
// appear in the file; it is printed only where the path alone is not enough
// to find the spot (unknown and repeated keys).
type fieldError struct {
	path string
	line int
	msg  string
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return "config: " + e.msg
	}
	return "config: " + e.path + ": " + e.msg
}

// decoder collects every problem found while walking the file, so that one
// run reports them all.
type decoder struct {
	getenv func(string) string
	errs   []*fieldError
	checks []func() // cross-references, run once the whole file is read
}

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &fieldError{path: path, line: line, msg: fmt.Sprintf(format, args...)})
}

// later queues a check that needs the whole file, such as whether a
// provider named by a channel is defined further down.
func (d *decoder) later(check func()) {
	d.checks = append(d.checks, check)
}

// err runs the queued checks and returns every problem in file order, or nil.
func (d *decoder) err() error {
	for _, check := range d.checks {
		check()
	}
	d.checks = nil
	if len(d.errs) == 0 {
		return nil
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].line < d.errs[j].line })
	if len(d.errs) == 1 {
		return d.errs[0]
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// resolve follows aliases (*anchor) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a node's kind for type errors, never its value.
func describe(n *yaml.Node) string {
	switch {
	case isNull(n):
		return "empty"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	}
	return "a string"
}

// handlers maps the keys a mapping may hold to the functions that decode
// their values. A handler gets the value's key path and the resolved,
// non-null value node.
type handlers map[string]func(path string, v *yaml.Node)

// mapping walks the mapping n in file order and hands each value to its
// handler. Null values count as omitted, so `key:` with nothing after it
// leaves the default in place. It returns the keys that were set, with their
// value nodes, and false when n is not a mapping at all.
func (d *decoder) mapping(path string, n *yaml.Node, hs handlers) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		if path == "" {
			d.fail(path, n, "the file must be a mapping of keys to values, not %s", describe(n))
		} else {
			d.fail(path, n, "must be a mapping of keys to values, not %s", describe(n))
		}
		return nil, false
	}
	set := make(map[string]*yaml.Node)
	firstLine := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.fail(path, n.Content[i], "keys must be plain names, not %s (line %d)", describe(k), n.Content[i].Line)
			continue
		}
		key := k.Value
		if first, dup := firstLine[key]; dup {
			d.fail(path, n.Content[i], "key %q appears twice (lines %d and %d)", key, first, n.Content[i].Line)
			continue
		}
		firstLine[key] = n.Content[i].Line
		h, known := hs[key]
		if !known {
			d.fail(path, n.Content[i], "unknown key %q at line %d%s", key, n.Content[i].Line, suggest(key, hs))
			continue
		}
		if isNull(v) {
			continue
		}
		set[key] = v
		h(joinPath(path, key), v)
	}
	return set, true
}

// suggest returns ` (did you mean "x"?)` for the known key closest to a
// misspelt one, or "".
func suggest(key string, hs handlers) string {
	known := make([]string, 0, len(hs))
	for k := range hs {
		known = append(known, k)
	}
	slices.Sort(known)
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist && d <= len(key)/2 {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// list walks the sequence n, handing each resolved item to each.
func (d *decoder) list(path string, n *yaml.Node, each func(path string, item *yaml.Node)) bool {
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "must be a list, not %s", describe(n))
		return false
	}
	for i, item := range n.Content {
		each(indexPath(path, i), resolve(item))
	}
	return true
}

// str decodes a scalar as a string. Numbers and booleans are taken as
// written, so `prompt_version: 2` is "2". Its messages never repeat the
// value, which makes it safe for secrets.
func (d *decoder) str(path string, n *yaml.Node, dst *string) bool {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be a string, not %s", describe(n))
		return false
	}
	*dst = n.Value
	return true
}

// text decodes a string that must not be empty.
func (d *decoder) text(path string, n *yaml.Node, dst *string) bool {
	var s string
	if !d.str(path, n, &s) {
		return false
	}
	if strings.TrimSpace(s) == "" {
		d.fail(path, n, "must not be empty")
		return false
	}
	*dst = s
	return true
}

// oneOf decodes a string that must be one of choices.
func (d *decoder) oneOf(path string, n *yaml.Node, dst *string, what string, choices ...string) bool {
	var s string
	if !d.str(path, n, &s) {
		return false
	}
	if !slices.Contains(choices, s) {
		d.fail(path, n, "%q is not %s (use %s)", s, what, orList(choices))
		return false
	}
	*dst = s
	return true
}

func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

func (d *decoder) integer(path string, n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be a whole number, not %s", describe(n))
		return 0, false
	}
	var v int64
	switch n.ShortTag() {
	case "!!int":
		if n.Decode(&v) == nil {
			return v, true
		}
	case "!!str":
		// A quoted number ("4") is still clearly meant as one.
		if p, err := strconv.ParseInt(strings.TrimSpace(n.Value), 10, 64); err == nil {
			return p, true
		}
	}
	d.fail(path, n, "%q is not a whole number", n.Value)
	return 0, false
}

// intIn decodes an int within [lo, hi].
func (d *decoder) intIn(path string, n *yaml.Node, dst *int, lo, hi int) bool {
	v, ok := d.integer(path, n)
	if !ok {
		return false
	}
	if v < int64(lo) || v > int64(hi) {
		d.fail(path, n, "must be between %d and %d, not %d", lo, hi, v)
		return false
	}
	*dst = int(v)
	return true
}

func (d *decoder) boolean(path string, n *yaml.Node, dst *bool) bool {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be true or false, not %s", describe(n))
		return false
	}
	if n.ShortTag() != "!!bool" || n.Decode(dst) != nil {
		d.fail(path, n, "%q is not true or false", n.Value)
		return false
	}
	return true
}

// duration decodes a Go duration string. It must be more than zero unless
// zeroOK, and it is never negative.
func (d *decoder) duration(path string, n *yaml.Node, dst *time.Duration, zeroOK bool) bool {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "must be a duration such as 30s, 5m or 2h, not %s", describe(n))
		return false
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		d.fail(path, n, "%q is not a duration (use e.g. 30s, 5m, 2h)", n.Value)
		return false
	}
	switch {
	case v < 0 && zeroOK:
		d.fail(path, n, "%s is negative; use 0 or more", n.Value)
		return false
	case v < 0:
		d.fail(path, n, "%s is negative; it must be more than zero", n.Value)
		return false
	case v == 0 && !zeroOK:
		d.fail(path, n, "must be more than zero, not %s", n.Value)
		return false
	}
	*dst = v
	return true
}

// fmtDuration prints a duration the way people write one: 1h, not 1h0m0s.
func fmtDuration(v time.Duration) string {
	s := v.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
