// Command gitops-health prints what the GitOps engines make of DevicePluginConfig objects: kstatus
// (sigs.k8s.io/cli-utils, what Flux's health checks read) and an Argo CD custom health check in Lua
// (config/argocd/health.lua), run under gopher-lua the way Argo CD's application controller runs one.
//
//	gitops-health --argocd-health config/argocd/health.lua [FILE...]
//
// It reads JSON objects from the files, or from stdin without any: one object per document, any number
// of documents, and a `kind: ...List` (`kubectl get dpc -o json`) stands for its items. For each object
// it writes one JSON line:
//
//	{"name":"...","kstatus":{"status":"Current","message":"..."},"argocd":{"status":"Healthy","message":"..."}}
//
// An engine that fails on an object says so in "error" beside what it reports for the failure: kstatus
// returns no status then; Argo CD shows Unknown with the error as message. Exit status 1 on unreadable
// input, 2 on usage errors; an engine failing on an object is output, not an exit status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Verdict is one engine's answer for one object.
type Verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
}

// Line is the output for one object.
type Line struct {
	Name    string  `json:"name"`
	Kstatus Verdict `json:"kstatus"`
	ArgoCD  Verdict `json:"argocd"`
}

func main() {
	healthFile := flag.String("argocd-health", "", "the Argo CD health check (Lua) to run, e.g. config/argocd/health.lua")
	openLibs := flag.Bool("use-open-libs", false,
		"run the check with every gopher-lua library, as Argo CD does when resource.customizations.useOpenLibs.<group_kind> is true")
	flag.Parse()
	if *healthFile == "" {
		fmt.Fprintln(os.Stderr, "gitops-health: --argocd-health FILE is required")
		os.Exit(2)
	}
	script, err := os.ReadFile(*healthFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gitops-health: %v\n", err)
		os.Exit(2)
	}

	var inputs []io.Reader
	names := flag.Args()
	if len(names) == 0 {
		inputs = append(inputs, os.Stdin)
		names = []string{"stdin"}
	} else {
		for _, name := range names {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintf(os.Stderr, "gitops-health: %v\n", err)
				os.Exit(1)
			}
			defer f.Close()
			inputs = append(inputs, f)
		}
	}

	out := json.NewEncoder(os.Stdout)
	for i, in := range inputs {
		objects, err := readObjects(in)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gitops-health: %s: %v\n", names[i], err)
			os.Exit(1)
		}
		for _, u := range objects {
			line := Line{Name: u.GetName(), Kstatus: kstatusOf(u), ArgoCD: argoCDHealthOf(u, string(script), *openLibs)}
			if err := out.Encode(line); err != nil {
				fmt.Fprintf(os.Stderr, "gitops-health: %v\n", err)
				os.Exit(1)
			}
		}
	}
}

// readObjects decodes a stream of JSON documents the way client-go decodes what the API server sends
// (unstructured, integers as int64), expanding lists into their items.
func readObjects(in io.Reader) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	dec := json.NewDecoder(in)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return objects, nil
		} else if err != nil {
			return nil, err
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, err
		}
		if strings.HasSuffix(head.Kind, "List") {
			list := &unstructured.UnstructuredList{}
			if err := list.UnmarshalJSON(raw); err != nil {
				return nil, err
			}
			for i := range list.Items {
				objects = append(objects, &list.Items[i])
			}
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		objects = append(objects, u)
	}
}

// kstatusOf is kstatus's answer as Flux's health checks get it: status.Compute on the live object.
func kstatusOf(u *unstructured.Unstructured) Verdict {
	res, err := status.Compute(u)
	if err != nil {
		return Verdict{Error: err.Error()}
	}
	return Verdict{Status: string(res.Status), Message: res.Message}
}

// What follows mirrors how Argo CD evaluates a custom health check, as read in argo-cd v3.5.1:
//   - gitops-engine/pkg/health/health.go, GetResourceHealth: an object being deleted (and not held by
//     the hook finalizer) is Progressing "Pending deletion" before any check runs; an error from the
//     check becomes Unknown with the error's text as the message.
//   - util/lua/lua.go, GetHealthScript: a check from argocd-cm runs without the standard libraries
//     unless resource.customizations.useOpenLibs.<group_kind> is true.
//   - util/lua/lua.go, runLuaWithResourceActionParameters, and util/lua/oslib_safe.go: a state with
//     SkipOpenLibs; package, base and table opened, then OpenSafeOs, which registers time and date
//     under the module name lua.TabLibName ("table"), already loaded, so gopher-lua's RegisterModule
//     changes nothing: a check has no global os (and no string, math, ...), and require("os") gets a
//     preloaded module of time and date; a one-second context; the globals actionParams (an empty
//     table for health checks) and obj (decodeValue of the unstructured object); the script run, and a
//     runtime error's Lua stack trace dropped from the message.
//   - util/lua/lua.go, ExecuteHealthLua: a returned table is encoded with layeh.com/gopher-json and
//     unmarshalled into {status, message} (a type mismatch, as from an empty table, which encodes
//     as [], gives an empty status); a status outside Unknown, Progressing, Suspended, Healthy,
//     Degraded, Missing becomes Unknown "Lua returned an invalid health status"; nil gives an empty
//     status; any other type is an error.
// Versions are those argo-cd v3.5.1 pins: gopher-lua v1.1.2, gopher-json 97fed8db8427 (go.mod here).

const hookFinalizer = "argocd.argoproj.io/hook-finalizer"

var validArgoCDHealth = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func argoCDHealthOf(u *unstructured.Unstructured, script string, openLibs bool) Verdict {
	if u.GetDeletionTimestamp() != nil {
		held := false
		for _, f := range u.GetFinalizers() {
			held = held || f == hookFinalizer
		}
		if !held {
			return Verdict{Status: "Progressing", Message: "Pending deletion"}
		}
	}
	v, err := runHealthScript(u, script, openLibs)
	if err != nil {
		return Verdict{Status: "Unknown", Message: err.Error(), Error: err.Error()}
	}
	return v
}

func runHealthScript(u *unstructured.Unstructured, script string, openLibs bool) (Verdict, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	timeAndDate := osTimeAndDate()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		// Argo CD's "safe os": registered under lua.TabLibName, which is loaded by now, so a no-op
		// (gopher-lua's RegisterModule returns a loaded module as it is). Kept for the same effect.
		{lua.OsLibName, func(l *lua.LState) int {
			l.Push(l.RegisterModule(lua.TabLibName, timeAndDate))
			return 1
		}},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Verdict{}, fmt.Errorf("opening the Lua library %q: %w", lib.name, err)
		}
	}
	// require("os") finds a module with time and date only (with the open libraries, os is already
	// loaded and require returns the whole library).
	l.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(l.SetFuncs(l.NewTable(), timeAndDate))
		return 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("actionParams", l.NewTable())
	l.SetGlobal("obj", toLua(l, u.Object))

	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
		apiErr.StackTrace = ""
		err = apiErr
	}
	if err != nil {
		return Verdict{}, err
	}

	switch returned := l.Get(-1); returned.Type() {
	case lua.LTNil:
		return Verdict{}, nil
	case lua.LTTable:
		encoded, err := luajson.Encode(returned)
		if err != nil {
			return Verdict{}, err
		}
		var hs struct {
			Status  string `json:"status,omitempty"`
			Message string `json:"message,omitempty"`
		}
		if err := json.Unmarshal(encoded, &hs); err != nil {
			// Meant for the empty table (encoded as []), but errors.As matches any type mismatch, so a
			// number as status gives an empty status too.
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				return Verdict{}, nil
			}
			return Verdict{}, err
		}
		if !validArgoCDHealth[hs.Status] {
			return Verdict{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
		}
		return Verdict{Status: hs.Status, Message: hs.Message}, nil
	default:
		return Verdict{}, fmt.Errorf("expect table output from Lua script, not %s", returned.Type())
	}
}

// osTimeAndDate is gopher-lua's os.time and os.date, the two functions Argo CD's reduced os library
// offers (util/lua/oslib_safe.go has its own copies of them).
func osTimeAndDate() map[string]lua.LGFunction {
	scratch := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer scratch.Close()
	lua.OpenOs(scratch)
	os := scratch.GetGlobal(lua.OsLibName)
	funcs := map[string]lua.LGFunction{}
	for _, name := range []string{"time", "date"} {
		if fn, ok := scratch.GetField(os, name).(*lua.LFunction); ok && fn.IsG {
			funcs[name] = fn.GFunction
		}
	}
	return funcs
}

// toLua converts an unstructured value the way Argo CD's decodeValue does: numbers (int64 from the API
// server's JSON, or float64) become Lua numbers, a json.Number a string, lists sequences from 1, maps
// tables with string keys, and anything else nil.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetH(lua.LString(k), toLua(l, item))
		}
		return t
	default:
		return lua.LNil
	}
}
