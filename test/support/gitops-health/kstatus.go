// kstatus's reading of an object: the rules Flux's health checks (Kustomization wait and
// healthChecks) and cli-utils' apply/wait use, from sigs.k8s.io/cli-utils itself.
package main

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// The object is decoded as client-go decodes one (integers as int64), which kstatus expects.
func kstatusHealth(line []byte) verdict {
	object := &unstructured.Unstructured{}
	if err := object.UnmarshalJSON(line); err != nil {
		return verdict{Error: err.Error()}
	}
	result, err := status.Compute(object)
	if err != nil {
		return verdict{Error: err.Error()}
	}
	return verdict{Status: string(result.Status), Message: result.Message}
}
