//go:build tools

// Package tools records the upstream commands this module builds, so `go mod tidy` keeps them: the control
// plane, kubectl, and the real node's kubelet and kube-proxy (../../build.sh) and the sample device
// plugin `make bench-plugin` compares dpo with (../../build-sample-device-plugin.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/images/sample-device-plugin"
)
