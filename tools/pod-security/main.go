// The pod-security harness: Pod Security Standards verdicts on pod templates, from the checks the API
// server's PodSecurity admission runs (k8s.io/pod-security-admission/policy), not from a list of our own.
//
// Input on stdin: one JSON object per line, {"name", "metadata", "spec"} with spec a core/v1 PodSpec (a
// pod, or a workload's pod template, which is what admission evaluates for workloads). Output: one JSON
// line per input, in order, with each (level, version) asked for and the checks that failed there.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

type podInput struct {
	Name     string            `json:"name"`
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     corev1.PodSpec    `json:"spec"`
}

type failure struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

type verdict struct {
	Level   string `json:"level"`
	Version string `json:"version"`
	Allowed bool   `json:"allowed"`
	// Checks is how many checks the evaluator ran at this level and version, so an evaluation that ran
	// nothing is told apart from a clean one.
	Checks   int       `json:"checks"`
	Failures []failure `json:"failures"`
}

type podVerdict struct {
	Name     string    `json:"name"`
	Verdicts []verdict `json:"verdicts"`
}

// labelledEvaluator is the upstream evaluator over DefaultChecks, each check function wrapped to note its
// ID as it runs. The registry alone decides which checks run for a level and version (including the
// restricted checks that override baseline ones); CheckResult carries no ID, so the wrapper supplies it.
type labelledEvaluator struct {
	evaluator policy.Evaluator
	ran       []policy.CheckID
}

func newLabelledEvaluator() (*labelledEvaluator, error) {
	e := &labelledEvaluator{}
	checks := policy.DefaultChecks()
	for i := range checks {
		id := checks[i].ID
		for j := range checks[i].Versions {
			inner := checks[i].Versions[j].CheckPod
			checks[i].Versions[j].CheckPod = func(m *metav1.ObjectMeta, s *corev1.PodSpec) policy.CheckResult {
				e.ran = append(e.ran, id)
				return inner(m, s)
			}
		}
	}
	// No emulation version: "latest" means the newest rules this release of the library knows.
	evaluator, err := policy.NewEvaluator(checks, nil)
	if err != nil {
		return nil, err
	}
	e.evaluator = evaluator
	return e, nil
}

func (e *labelledEvaluator) evaluate(lv api.LevelVersion, pod *podInput) (verdict, error) {
	e.ran = e.ran[:0]
	results := e.evaluator.EvaluatePod(lv, &pod.Metadata, &pod.Spec)
	if len(results) != len(e.ran) {
		return verdict{}, fmt.Errorf("%d results for %d checks run", len(results), len(e.ran))
	}
	v := verdict{Level: string(lv.Level), Version: lv.Version.String(), Allowed: true, Checks: len(results), Failures: []failure{}}
	for i, r := range results {
		if r.Allowed {
			continue
		}
		v.Allowed = false
		v.Failures = append(v.Failures, failure{Check: string(e.ran[i]), Reason: r.ForbiddenReason, Detail: r.ForbiddenDetail})
	}
	return v, nil
}

func parseList[T any](list string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, s := range strings.Split(list, ",") {
		v, err := parse(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func run(stdin io.Reader, stdout io.Writer, levelList, versionList string) error {
	levels, err := parseList(levelList, func(s string) (api.Level, error) {
		l, err := api.ParseLevel(s)
		if err == nil && l == api.LevelPrivileged {
			err = errors.New("privileged: nothing to check")
		}
		return l, err
	})
	if err != nil {
		return fmt.Errorf("--levels: %w", err)
	}
	versions, err := parseList(versionList, api.ParseVersion)
	if err != nil {
		return fmt.Errorf("--versions: %w", err)
	}
	evaluator, err := newLabelledEvaluator()
	if err != nil {
		return err
	}

	scanner := bufio.NewScanner(stdin)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	out := json.NewEncoder(stdout)
	for line := 1; scanner.Scan(); line++ {
		if len(bytes.TrimSpace(scanner.Bytes())) == 0 {
			continue
		}
		// Unknown fields are an error: a misspelt field would otherwise be dropped here and pass every check.
		decoder := json.NewDecoder(bytes.NewReader(scanner.Bytes()))
		decoder.DisallowUnknownFields()
		var pod podInput
		if err := decoder.Decode(&pod); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		answer := podVerdict{Name: pod.Name}
		for _, level := range levels {
			for _, version := range versions {
				v, err := evaluator.evaluate(api.LevelVersion{Level: level, Version: version}, &pod)
				if err != nil {
					return fmt.Errorf("line %d (%s) at %s:%s: %w", line, pod.Name, level, version, err)
				}
				answer.Verdicts = append(answer.Verdicts, v)
			}
		}
		if err := out.Encode(answer); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func main() {
	levels := flag.String("levels", "baseline,restricted", "comma-separated Pod Security levels to evaluate")
	versions := flag.String("versions", "latest", `comma-separated policy versions ("latest" or "v1.N")`)
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *levels, *versions); err != nil {
		fmt.Fprintln(os.Stderr, "pod-security:", err)
		os.Exit(2)
	}
}
