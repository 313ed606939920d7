package eval

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints res: one line per turn, then the summary, the
// candidate beside the drafts that were shown.
func WriteText(w io.Writer, res Results) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "draft\tchannel\tdistance shown→candidate\tguard hits\tcost\tlatency ms\t")
	for _, t := range res.Turns {
		if t.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\n", t.DraftID, t.Channel, oneLine(t.Error))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f → %.3f\t%d → %d\t%s → %s\t%s → %s\t\n", t.DraftID, t.Channel,
			t.Current.Distance, t.Candidate.Distance, t.Current.GuardHits, t.Candidate.GuardHits,
			money(t.Current.Cost), money(t.Candidate.Cost), ms(t.Current.LatencyMS), ms(t.Candidate.LatencyMS))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	s := res.Summary
	cur, cand := res.Settings.Current, res.Settings.Candidate
	fmt.Fprintf(w, "%d of %d planned turns drafted (%d approved turns matched), %d compared, %d without a candidate draft\n",
		len(res.Turns), res.Planned, res.Eligible, s.Compared, s.Failed)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "\tshown (%s, %s)\tcandidate (%s, %s)\t\n", cur.PromptVersion, cur.Model, cand.PromptVersion, cand.Model)
	row := func(name string, f func(SideSummary) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", name, f(s.Current), f(s.Candidate))
	}
	row("mean distance to sent", func(x SideSummary) string { return num(x.MeanDistance) })
	row("median distance to sent", func(x SideSummary) string { return num(x.MedianDistance) })
	row("sent as drafted", func(x SideSummary) string { return fmt.Sprint(x.Unchanged) })
	row("flagged drafts", func(x SideSummary) string { return fmt.Sprint(x.Flagged) })
	row("guard hits (language, figures)", func(x SideSummary) string {
		return fmt.Sprintf("%d (%d, %d)", x.GuardHits, x.LanguageHits, x.FigureHits)
	})
	row("cost "+res.Currency, func(x SideSummary) string { return money(x.Cost) })
	row("latency p50 ms", func(x SideSummary) string { return ms(x.LatencyP50) })
	row("latency p95 ms", func(x SideSummary) string { return ms(x.LatencyP95) })
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, Status(res))
	return nil
}

// Status is the run's state in one sentence.
func Status(res Results) string {
	spent := money(res.Spent) + " " + res.Currency
	switch {
	case res.Complete:
		return fmt.Sprintf("complete: every planned turn drafted, %s spent", strings.TrimSpace(spent))
	case res.Stopped == StoppedBudget:
		return fmt.Sprintf("stopped: the budget of %s %s is reached (%s spent) with %d of %d turns drafted; run the same command with a higher --budget to go on",
			money(*res.Budget), res.Currency, strings.TrimSpace(spent), len(res.Turns), res.Planned)
	case res.Stopped == StoppedError:
		return fmt.Sprintf("stopped by an error with %d of %d turns drafted (%s spent); run the same command to go on", len(res.Turns), res.Planned, strings.TrimSpace(spent))
	default:
		return fmt.Sprintf("stopped by a signal with %d of %d turns drafted (%s spent); run the same command to go on", len(res.Turns), res.Planned, strings.TrimSpace(spent))
	}
}

func num(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *p)
}

func ms(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *p)
}

func money(v float64) string { return fmt.Sprintf("%.4f", v) }

// oneLine keeps a text on one line of the table.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// WriteHTML writes res as one self-contained page. Every text in it is
// the customers' and the people's own (a message can hold <script>), so
// it goes through html/template, which escapes each by its context, and
// the page runs no script at all.
func WriteHTML(w io.Writer, res Results) error {
	return reportPage.Execute(w, res)
}

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"num": num, "ms": ms, "money": money, "status": Status,
	"figures": func(s Side) string {
		if s.Guards == nil {
			return ""
		}
		var parts []string
		if s.Guards.LanguageDiffers {
			parts = append(parts, "language "+s.Guards.ReplyLanguage+" (customer "+s.Guards.CustomerLanguage+")")
		}
		for _, f := range s.Guards.Figures {
			parts = append(parts, f.Kind+" "+f.Text)
		}
		return strings.Join(parts, "; ")
	},
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>handoff eval: {{.Settings.Candidate.PromptVersion}} beside {{.Settings.Current.PromptVersion}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1rem;max-width:80rem}
table{border-collapse:collapse;margin:1rem 0}
td,th{border:1px solid #ccc;padding:.3rem .5rem;vertical-align:top;text-align:left}
.text{white-space:pre-wrap;overflow-wrap:anywhere;max-width:24rem}
.flag{color:#a00}
</style>
</head>
<body>
<h1>handoff eval</h1>
<p>{{status .}}</p>
<p>{{len .Turns}} of {{.Planned}} planned turns drafted ({{.Eligible}} approved turns matched); {{.Summary.Compared}} compared, {{.Summary.Failed}} without a candidate draft. Source: {{.Source}}.</p>
<table>
<tr><th></th><th>shown ({{.Settings.Current.PromptVersion}}, {{.Settings.Current.Model}})</th><th>candidate ({{.Settings.Candidate.PromptVersion}}, {{.Settings.Candidate.Model}})</th></tr>
{{with .Summary}}
<tr><th>mean distance to sent</th><td>{{num .Current.MeanDistance}}</td><td>{{num .Candidate.MeanDistance}}</td></tr>
<tr><th>median distance to sent</th><td>{{num .Current.MedianDistance}}</td><td>{{num .Candidate.MedianDistance}}</td></tr>
<tr><th>sent as drafted</th><td>{{.Current.Unchanged}}</td><td>{{.Candidate.Unchanged}}</td></tr>
<tr><th>flagged drafts</th><td>{{.Current.Flagged}}</td><td>{{.Candidate.Flagged}}</td></tr>
<tr><th>guard hits (language, figures)</th><td>{{.Current.GuardHits}} ({{.Current.LanguageHits}}, {{.Current.FigureHits}})</td><td>{{.Candidate.GuardHits}} ({{.Candidate.LanguageHits}}, {{.Candidate.FigureHits}})</td></tr>
<tr><th>cost</th><td>{{money .Current.Cost}}</td><td>{{money .Candidate.Cost}}</td></tr>
<tr><th>latency p50 ms</th><td>{{ms .Current.LatencyP50}}</td><td>{{ms .Candidate.LatencyP50}}</td></tr>
<tr><th>latency p95 ms</th><td>{{ms .Current.LatencyP95}}</td><td>{{ms .Candidate.LatencyP95}}</td></tr>
{{end}}
</table>
<h2>Turns</h2>
<table>
<tr><th>turn</th><th>customer</th><th>sent</th><th>shown</th><th>candidate</th></tr>
{{range .Turns}}
<tr id="{{.DraftID}}">
<td>{{.DraftID}}<br>{{.Channel}}{{if .Edited}}<br>edited{{end}}</td>
<td class="text" dir="auto">{{.Customer}}</td>
<td class="text" dir="auto">{{.Sent}}</td>
<td><div class="text" dir="auto">{{.Current.Text}}</div>
distance {{printf "%.3f" .Current.Distance}}, {{.Current.GuardHits}} guard hits{{with figures .Current}} <span class="flag">({{.}})</span>{{end}}, cost {{money .Current.Cost}}, {{ms .Current.LatencyMS}} ms</td>
{{if .Error}}<td class="flag">{{.Error}}</td>{{else}}
<td><div class="text" dir="auto">{{.Candidate.Text}}</div>
distance {{printf "%.3f" .Candidate.Distance}}, {{.Candidate.GuardHits}} guard hits{{with figures .Candidate}} <span class="flag">({{.}})</span>{{end}}, cost {{money .Candidate.Cost}}, {{ms .Candidate.LatencyMS}} ms</td>{{end}}
</tr>
{{end}}
</table>
</body>
</html>
`))
