// The olm-validate harness: the operator framework's own checks on an OLM bundle directory (manifests/ and
// metadata/), from github.com/operator-framework/api, the library operator-sdk's `bundle validate` and
// operator-verify call, rather than a list of our own.
//
// Usage: olm-validate [--k8s-version 1.35] BUNDLE_DIR. It loads the bundle as OLM does
// (manifests.GetBundleFromDir), runs the default bundle validators (CSV, CRDs, the bundle as a whole) and
// the optional ones a catalogue runs (OperatorHub v2, standard capabilities and categories, objects such as
// RBAC and SCCs, good practices, APIs removed by --k8s-version), and prints one JSON object:
// {"bundle", "package", "channels", "validators", "errors": [...], "warnings": [...]}. Exit status 0 when no
// validator reported an error, 1 when one did, 2 when the bundle could not be loaded at all.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	verrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

type finding struct {
	Validator string `json:"validator"`
	Object    string `json:"object"`
	Type      string `json:"type"`
	Field     string `json:"field,omitempty"`
	// Value is what the check found wrong (an API, a rule), printed as Go prints it.
	Value  string `json:"value,omitempty"`
	Detail string `json:"detail"`
}

type report struct {
	Bundle     string    `json:"bundle"`
	Package    string    `json:"package"`
	Channels   []string  `json:"channels"`
	Objects    int       `json:"objects"`
	Validators []string  `json:"validators"`
	Errors     []finding `json:"errors"`
	Warnings   []finding `json:"warnings"`
}

type namedValidator struct {
	name      string
	validator interfaces.Validator
}

// The validators run, named for the report. MultipleArchitecturesValidator is left out: it inspects the
// images themselves, which needs a registry.
var validators = []namedValidator{
	{"ClusterServiceVersion", validation.ClusterServiceVersionValidator},
	{"CustomResourceDefinition", validation.CustomResourceDefinitionValidator},
	{"Bundle", validation.BundleValidator},
	{"OperatorHubV2", validation.OperatorHubV2Validator},
	{"StandardCapabilities", validation.StandardCapabilitiesValidator},
	{"StandardCategories", validation.StandardCategoriesValidator},
	{"Object", validation.ObjectValidator},
	{"GoodPractices", validation.GoodPracticesValidator},
	{"AlphaDeprecatedAPIs", validation.AlphaDeprecatedAPIsValidator},
}

func findingOf(validator, object string, e verrors.Error) finding {
	f := finding{Validator: validator, Object: object, Type: string(e.Type), Field: e.Field, Detail: detail(e)}
	if e.BadValue != nil {
		f.Value = fmt.Sprint(e.BadValue)
	}
	return f
}

func detail(e verrors.Error) string {
	if e.Detail != "" {
		return e.Detail
	}
	return e.Error()
}

func run(stdout io.Writer, dir, k8sVersion string) (int, error) {
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return 2, fmt.Errorf("loading the bundle from %s: %w", dir, err)
	}
	if bundle == nil || bundle.CSV == nil {
		return 2, fmt.Errorf("%s: no ClusterServiceVersion found", dir)
	}
	objects := bundle.ObjectsToValidate()
	// The optional validators read their settings from a map[string]string among the objects.
	objects = append(objects, map[string]string{"k8s-version": k8sVersion})

	r := report{
		Bundle: bundle.Name, Package: bundle.Package, Channels: bundle.Channels, Objects: len(bundle.Objects),
		Errors: []finding{}, Warnings: []finding{},
	}
	for _, v := range validators {
		r.Validators = append(r.Validators, v.name)
		for _, result := range v.validator.Validate(objects...) {
			for _, e := range result.Errors {
				r.Errors = append(r.Errors, findingOf(v.name, result.Name, e))
			}
			for _, w := range result.Warnings {
				r.Warnings = append(r.Warnings, findingOf(v.name, result.Name, w))
			}
		}
	}
	for _, list := range [][]finding{r.Errors, r.Warnings} {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Validator < list[j].Validator })
	}
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(r); err != nil {
		return 2, err
	}
	if len(r.Errors) > 0 {
		return 1, nil
	}
	return 0, nil
}

func main() {
	k8sVersion := flag.String("k8s-version", "", "the Kubernetes minor version (1.N) whose removed APIs are errors")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: olm-validate [--k8s-version 1.N] BUNDLE_DIR")
		os.Exit(2)
	}
	code, err := run(os.Stdout, flag.Arg(0), *k8sVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, "olm-validate:", err)
	}
	os.Exit(code)
}
