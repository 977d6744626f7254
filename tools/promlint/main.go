// The promlint harness: Prometheus' own metrics linter (promlint from client_golang, the rules
// `promtool check metrics` applies) over text expositions, as a /metrics endpoint serves them.
//
//	promlint [FILE|-]...   one JSON line per input:
//	                       {"source", "families", "problems": [{"metric", "text"}], "error"}
//
// `families` counts the metric families parsed, so a caller can tell an empty input (which has no
// problems either) from a clean one.
//
// Exit status 1 when an input cannot be read or parsed; problems alone do not fail: the caller decides
// which it accepts.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

type problem struct {
	Metric string `json:"metric"`
	Text   string `json:"text"`
}

type result struct {
	Source   string    `json:"source"`
	Families int       `json:"families"`
	Problems []problem `json:"problems"`
	Error    string    `json:"error,omitempty"`
}

// families reads a text exposition the way promlint.New does (the text format's decoder), keeping the
// families so they can be counted.
func families(in io.Reader) ([]*dto.MetricFamily, error) {
	decoder := expfmt.NewDecoder(in, expfmt.NewFormat(expfmt.TypeTextPlain))
	var all []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := decoder.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				return all, nil
			}
			return nil, err
		}
		all = append(all, mf)
	}
}

func lint(source string) result {
	r := result{Source: source, Problems: []problem{}}
	var in io.Reader = os.Stdin
	if source != "-" {
		f, err := os.Open(source)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		defer f.Close()
		in = f
	}
	mfs, err := families(in)
	if err != nil {
		r.Error = fmt.Sprintf("parsing the exposition: %v", err)
		return r
	}
	r.Families = len(mfs)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		r.Error = fmt.Sprintf("linting: %v", err)
		return r
	}
	for _, p := range problems {
		r.Problems = append(r.Problems, problem{Metric: p.Metric, Text: p.Text})
	}
	return r
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: promlint [FILE|-]...  (stdin when no file is given)")
	}
	flag.Parse()
	sources := flag.Args()
	if len(sources) == 0 {
		sources = []string{"-"}
	}
	out := json.NewEncoder(os.Stdout)
	failed := false
	for _, source := range sources {
		r := lint(source)
		if r.Error != "" {
			failed = true
		}
		if err := out.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if failed {
		os.Exit(1)
	}
}
