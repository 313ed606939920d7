package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// stats is one row of a table.
type stats struct {
	target   string
	rate     float64 // accepted requests per second
	p50, p99 time.Duration
	max      time.Duration
	errors   int
	pages    float64 // storage pages written per event; -1 when not measured
}

func summarize(target string, r result, n int) stats {
	s := stats{
		target: target,
		p50:    percentile(r.latencies, 50),
		p99:    percentile(r.latencies, 99),
		errors: r.failures(n),
	}
	if len(r.latencies) > 0 {
		s.max = r.latencies[len(r.latencies)-1]
	}
	if r.elapsed > 0 {
		s.rate = float64(r.accepted()) / r.elapsed.Seconds()
	}
	return s
}

// percentile returns the nearest-rank percentile p (0..100] of sorted: the
// smallest value that at least p% of the samples do not exceed. Nearest rank
// never invents a latency that no request had.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// p*n first: the product of integers is exact, p/100 is not.
	rank := int(math.Ceil(p * float64(len(sorted)) / 100))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// median of xs; the mean of the middle two for an even count.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func printTable(w io.Writer, rows []stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "target\taccepted/s\tp50\tp99\tmax\terrors")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", r.target, thousands(int64(math.Round(r.rate))), ms(r.p50), ms(r.p99), ms(r.max), r.errors)
	}
	tw.Flush()
}

// ms formats a latency in milliseconds, the unit every row shares, so the
// columns compare at a glance.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	}
}

// thousands formats n with comma separators: 21345 → "21,345".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// nouns writes n with its noun, "1 round", "3 rounds".
func nouns(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
