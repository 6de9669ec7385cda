// gitops-health reads Kubernetes objects as JSON lines on stdin and prints, for each, how a
// GitOps tool reads its health, as one JSON line on stdout:
//
//	gitops-health argo SCRIPT.lua   Argo CD's view: the resource.customizations health script
//	                                run by gopher-lua the way Argo CD runs it (argo.go)
//	gitops-health kstatus           kstatus's view (sigs.k8s.io/cli-utils status.Compute), as
//	                                Flux's health checks and `kubectl wait`-like tools read it
//
// One process handles every object, so a test starts it once. Test support only.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] == "argo" && len(os.Args) != 3) {
		fmt.Fprintln(os.Stderr, "usage: gitops-health argo SCRIPT.lua | gitops-health kstatus  (objects as JSON lines on stdin)")
		os.Exit(2)
	}
	var judge func([]byte) verdict
	switch os.Args[1] {
	case "argo":
		script, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		judge = func(line []byte) verdict {
			var object map[string]interface{}
			if err := json.Unmarshal(line, &object); err != nil {
				return verdict{Error: err.Error()}
			}
			return argoHealth(string(script), object)
		}
	case "kstatus":
		judge = kstatusHealth
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if err := out.Encode(judge(in.Bytes())); err != nil {
			os.Exit(1)
		}
	}
}
