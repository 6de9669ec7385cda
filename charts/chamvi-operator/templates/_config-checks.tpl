{{/*
The operator's config rules that values.schema.json cannot state, checked at `helm template` /
`helm install` so a release never renders a config the operator refuses at start-up (a pod
that crash-loops, or an upgrade without --wait that reports success over one). JSON Schema
checks one value at a time, so the rules between keys are here, each failing with the
operator's own words (operator/src/config/operator-config.ts, loadOperatorConfig);
test/integration/chart.test.ts renders each. Single-key rules the operator makes in code are
in the generated schema where a keyword says them (CODE_CHECKS_AS_SCHEMA in
operator/src/config/chart-values-schema.ts).
*/}}
{{- define "chamvi.checkConfig" -}}
{{- $config := .Values.config -}}
{{- /* As client-go requires: a standby must not take the lease while the leader, still within its renew deadline, goes on acting. */ -}}
{{- $election := .Values.leaderElection -}}
{{- if le (int $election.leaseDurationSeconds) (int $election.renewDeadlineSeconds) -}}
{{- fail (printf "leaderElection: leaseDurationSeconds (%d) must be greater than renewDeadlineSeconds (%d) (or two replicas lead at once)" (int $election.leaseDurationSeconds) (int $election.renewDeadlineSeconds)) -}}
{{- end -}}
{{- if le (int $election.renewDeadlineSeconds) (int $election.retryPeriodSeconds) -}}
{{- fail (printf "leaderElection: renewDeadlineSeconds (%d) must be greater than retryPeriodSeconds (%d) (a leader must get more than one try to renew)" (int $election.renewDeadlineSeconds) (int $election.retryPeriodSeconds)) -}}
{{- end -}}
{{- /* A pool in a namespace the operator does not watch has no pod cache and no RBAC there. */ -}}
{{- $watched := $config.watchNamespaces | default list -}}
{{- $pools := dict -}}
{{- range $pool := $config.warmPools | default list -}}
{{- $id := printf "%s/%s" $pool.namespace $pool.name -}}
{{- if hasKey $pools $id -}}
{{- fail (printf "config.warmPools: two pools are named %s in namespace %s; a pool's name is unique in its namespace" $pool.name $pool.namespace) -}}
{{- end -}}
{{- $_ := set $pools $id true -}}
{{- if and $watched (not (has $pool.namespace $watched)) -}}
{{- fail (printf "config.warmPools: pool %s is in namespace %s, which config.watchNamespaces does not list; add it there or move the pool" $pool.name $pool.namespace) -}}
{{- end -}}
{{- end -}}
{{- range $index, $toleration := ($config.sandboxPlacement | default dict).tolerations | default list -}}
{{- if and (eq ($toleration.operator | default "") "Exists") $toleration.value -}}
{{- fail (printf "config.sandboxPlacement.tolerations[%d]: a toleration with operator Exists takes no value" $index) -}}
{{- end -}}
{{- if and (not (hasKey $toleration "key")) (ne ($toleration.operator | default "") "Exists") -}}
{{- fail (printf "config.sandboxPlacement.tolerations[%d]: a toleration without a key needs operator Exists" $index) -}}
{{- end -}}
{{- end -}}
{{- $endpoint := include "chamvi.canonicalEndpointPattern" . -}}
{{- $defaultPort := include "chamvi.defaultPortEndpointPattern" . -}}
{{- range $config.allowModelEndpoints | default list -}}
{{- if or (not (regexMatch $endpoint .)) (regexMatch $defaultPort .) -}}
{{- fail (printf "config.allowModelEndpoints: %q is not a canonical endpoint URL, which the operator refuses at start-up: write the scheme and host in lower case, leave out a default port (:443 of https, :80 of http), and give a path of segments that are not empty, . or .. (such as https://llm.internal/v1)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
What parseEndpointPattern (operator/src/reconcile/model-endpoints.ts) accepts, as an RE2
expression: http or https, a lower-case DNS name or a bracketed IPv6 address, a port from 1 to
65535 without leading zeros, then path segments of its characters (`*` among them), none empty,
. or .., and an optional trailing /. The operator's last check, that a URL parser writes the
pattern back unchanged, is not here: an IP address in another form than its canonical one
(127.1, 0x7f.0.0.1, [0::1]) passes this and is refused at start-up.
*/}}
{{- define "chamvi.canonicalEndpointPattern" -}}
^https?://(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(?:/(?:[A-Za-z0-9_~!$&'()+,;=:*-][A-Za-z0-9._~!$&'()+,;=:*-]*|\.[A-Za-z0-9_~!$&'()+,;=:*-][A-Za-z0-9._~!$&'()+,;=:*-]*|\.\.[A-Za-z0-9._~!$&'()+,;=:*-]+))*/?$
{{- end -}}

{{- define "chamvi.defaultPortEndpointPattern" -}}
^(?:https://[^/]*:443|http://[^/]*:80)(?:/|$)
{{- end -}}

{{/*
The chart's own rules between values: a release that renders but does not do what its values
say (a policy asked for and not installed, two pods leading at once, an operator pod one run
author can have evicted, a Redis two namespaces fill for all or its memory limit kills, a Role
put in a namespace the values did not name). Each fails naming the values to
change; test/integration/chart-release-checks.test.ts renders each.
*/}}
{{- define "chamvi.checkRelease" -}}
{{- $values := .Values -}}
{{- /* Separation of duties is a rule of the approval policy: without the policy, nothing keeps a run's creator from answering its approvals. */ -}}
{{- if and $values.approvalPolicy.separationOfDuties (not $values.approvalPolicy.enabled) -}}
{{- fail "approvalPolicy.separationOfDuties is true but approvalPolicy.enabled is false: separation of duties is enforced by the approval policy, which would not be installed, so a run's creator could answer its approvals; set approvalPolicy.enabled=true, or separationOfDuties=false" -}}
{{- end -}}
{{- /* Without a lease every replica reconciles as the leader: one pod at a time, a rollout included (deployment.yaml then uses Recreate). */ -}}
{{- if and (not $values.leaderElection.enabled) (ne (int $values.replicaCount) 1) -}}
{{- fail (printf "leaderElection.enabled is false with replicaCount %d: without the lease every replica reconciles runs as the leader and they act on the same runs at once; set replicaCount=1 (the chart then replaces the pod with strategy Recreate, the old one stopped before the new one starts) or leaderElection.enabled=true" (int $values.replicaCount)) -}}
{{- end -}}
{{- with $values.tmpSizeLimit -}}
{{- $needed := include "chamvi.tmpNeededBytes" $ | int64 -}}
{{- if lt (include "chamvi.quantityBytes" . | int64) $needed -}}
{{- fail (printf "tmpSizeLimit %s is below what the clones of one replica may hold in /tmp at once, config.workerConcurrency (%d) x (4 x config.maxCheckoutBytes (%d) + 32Mi + config.maxCheckoutFiles (%d) x 5120) + config.cloneCacheMaxBytes (%d) = %dMi, and the kubelet evicts the operator pod past it (every run of the replica with it): leave tmpSizeLimit empty (the chart then uses that sum, at least 4Gi), raise it, or lower config.maxCheckoutBytes, config.maxCheckoutFiles, config.workerConcurrency or config.cloneCacheMaxBytes (docs/operations.md \"Sizing the operator's /tmp\")" . (include "chamvi.workerConcurrency" $ | int64) (include "chamvi.maxCheckoutBytes" $ | int64) (include "chamvi.maxCheckoutFiles" $ | int64) (include "chamvi.cloneCacheMaxBytes" $ | int64) (div (add $needed 1048575) 1048576)) -}}
{{- end -}}
{{- end -}}
{{- /* With noeviction a full Redis refuses every write: namespaceMaxStateBytes keeps one namespace from filling it, and here two namespaces at their budgets (one, where watchNamespaces names just one) must leave a quarter of maxmemory to the queue. */ -}}
{{- if include "chamvi.redisBundled" . -}}
{{- $maxmemory := include "chamvi.redisMemoryBytes" $values.redis.bundled.maxmemory | int64 -}}
{{- $budget := include "chamvi.namespaceMaxStateBytes" . | int64 -}}
{{- $namespaces := ternary 1 2 (eq (len ($values.config.watchNamespaces | default list | uniq)) 1) -}}
{{- if and (gt $maxmemory 0) (gt (mul 4 $namespaces $budget) (mul 3 $maxmemory)) -}}
{{- fail (printf "config.namespaceMaxStateBytes (%d, %dMi) is too large for the bundled Redis's redis.bundled.maxmemory (%s): %s at that budget would hold %dMi of run state, more than three quarters of maxmemory (the rest is the queue's), and a full Redis (noeviction) refuses every namespace's saves; lower config.namespaceMaxStateBytes to at most %d, or raise redis.bundled.maxmemory to at least %dmb and redis.bundled.resources.limits.memory to half as much again (docs/operations.md \"Sizing Redis\")" $budget (div $budget 1048576) (toString $values.redis.bundled.maxmemory) (ternary "the one watched namespace" "two namespaces" (eq $namespaces 1)) (div (mul $namespaces $budget) 1048576) (div (mul 3 $maxmemory) (mul 4 $namespaces)) (div (add (mul 4 $namespaces $budget) (sub (mul 3 1048576) 1)) (mul 3 1048576))) -}}
{{- end -}}
{{- /* Redis takes memory past maxmemory (an AOF rewrite's fork copying pages, client buffers, fragmentation): under a container limit close to it the kernel kills Redis before noeviction refuses a write, and each restart reloads the AOF into the same limit. */ -}}
{{- $limit := dig "resources" "limits" "memory" "" $values.redis.bundled -}}
{{- if and (gt $maxmemory 0) (toString $limit) -}}
{{- $limitBytes := include "chamvi.kubeQuantityBytes" $limit | int64 -}}
{{- if lt (mul 2 $limitBytes) (mul 3 $maxmemory) -}}
{{- fail (printf "redis.bundled.resources.limits.memory (%s, %dMi) is below one and a half times redis.bundled.maxmemory (%s, %dMi): Redis takes memory past maxmemory (an AOF rewrite's fork, client buffers, fragmentation), so at that limit the kernel kills it before noeviction refuses a write, and each restart reloads the AOF into the same limit and is killed again; set redis.bundled.resources.limits.memory to at least %dMi, or lower redis.bundled.maxmemory to at most %dmb (docs/operations.md \"Sizing Redis\")" (toString $limit) (div $limitBytes 1048576) (toString $values.redis.bundled.maxmemory) (div (add $maxmemory 1048575) 1048576) (div (add (mul 3 $maxmemory) (sub (mul 2 1048576) 1)) (mul 2 1048576)) (div (mul 2 $limitBytes) (mul 3 1048576))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* An egress proxy of your own, read by Service name: the chart grants the operator get on that Service in config.egressProxy.namespace (rbac.yaml), which must be named rather than defaulted. */ -}}
{{- $ownProxy := $values.config.egressProxy | default dict -}}
{{- if and (not $values.egressProxy.enabled) $ownProxy.service (not $ownProxy.address) (not $ownProxy.namespace) -}}
{{- fail (printf "config.egressProxy.service (%s) is set without config.egressProxy.namespace: name the namespace that Service is in. Unset, the operator reads it in its default namespace, chamvi-system, and the chart would create the Role and RoleBinding letting it get the Service there: the install fails where that namespace does not exist, and a GitOps tool that lets the release write only to its own namespace (%s) refuses the sync. Set config.egressProxy.namespace (%s where the proxy runs beside the operator); that namespace must exist before the install" $ownProxy.service $.Release.Namespace $.Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* The operator's values for the keys these rules read: the config's, else the operator's default (operator/src/config/operator-config.ts). */}}
{{- define "chamvi.workerConcurrency" -}}{{ .Values.config.workerConcurrency | default 8 | int64 }}{{- end -}}
{{- define "chamvi.maxCheckoutBytes" -}}{{ .Values.config.maxCheckoutBytes | default 1073741824 | int64 }}{{- end -}}
{{- define "chamvi.maxCheckoutFiles" -}}{{ .Values.config.maxCheckoutFiles | default 250000 | int64 }}{{- end -}}
{{- define "chamvi.cloneCacheMaxBytes" -}}{{ .Values.config.cloneCacheMaxBytes | default 0 | int64 }}{{- end -}}
{{- define "chamvi.namespaceMaxStateBytes" -}}{{ .Values.config.namespaceMaxStateBytes | default 201326592 | int64 }}{{- end -}}

{{/*
Bytes the clones of one replica may hold in its /tmp at once (docs/operations.md "Sizing the
operator's /tmp"): each of workerConcurrency prepares, while its archive is written, the pack,
the tree and the archive of both (4 x maxCheckoutBytes + 32 MiB), and the clone cache beside them.
maxCheckoutBytes counts file sizes, but the kubelet measures the emptyDir by the blocks its
files take, and maxCheckoutFiles is checked on its own: 250 000 one-byte files are 250 KB of
checkout and download, yet each takes a 4 KiB block in the tree (so does each directory, which
maxCheckoutFiles counts too) and a 512-byte header plus up to 511 bytes of padding in the tar
archive (`tar -cf`, uncompressed). So each clone also holds up to maxCheckoutFiles x (4096 + 1024)
bytes: about 1.2 GiB at the default 250 000. Not counted: git's index (about 70 bytes and the
path of each file, some 25 MB at 250 000 short paths) and the long-name header tar adds for each
path over 100 bytes, so many long paths can pass the sum; the 4Gi floor (chamvi.tmpSizeLimit)
is room for them only where the config's limits are small.
*/}}
{{- define "chamvi.tmpNeededBytes" -}}
{{- $perFile := add 4096 1024 -}}
{{- $perClone := add (mul 4 (include "chamvi.maxCheckoutBytes" . | int64)) 33554432 (mul (include "chamvi.maxCheckoutFiles" . | int64) $perFile) -}}
{{- add (mul (include "chamvi.workerConcurrency" . | int64) $perClone) (include "chamvi.cloneCacheMaxBytes" . | int64) -}}
{{- end -}}

{{/*
The sizeLimit of the operator's /tmp emptyDir: tmpSizeLimit, else what the clones may hold
(rounded up to Mi) and at least 4Gi, the chart's fixed size before it was computed: room for
what the sum leaves out (see chamvi.tmpNeededBytes) where the config's limits are small.
*/}}
{{- define "chamvi.tmpSizeLimit" -}}
{{- if .Values.tmpSizeLimit -}}
{{- .Values.tmpSizeLimit -}}
{{- else -}}
{{- printf "%dMi" (max 4096 (div (add (include "chamvi.tmpNeededBytes" . | int64) 1048575) 1048576)) -}}
{{- end -}}
{{- end -}}

{{/* Bytes of a Kubernetes quantity as values.schema.json allows it for tmpSizeLimit: an integer, optionally with one of k M G T Ki Mi Gi Ti. */}}
{{- define "chamvi.quantityBytes" -}}
{{- $number := regexFind "^[0-9]+" . -}}
{{- $factors := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- mul (atoi $number) (get $factors (trimPrefix $number .)) -}}
{{- end -}}

{{/*
Bytes of a Redis memory setting, as redis.conf reads it: an integer, optionally with b, kb, mb or
gb (1024-based) or k, m or g (1000-based: 1m is 1000000 bytes, 1mb 1048576), in any case.
values.schema.json allows the first four for maxmemory.
*/}}
{{- define "chamvi.redisMemoryBytes" -}}
{{- $value := lower (toString .) -}}
{{- $number := regexFind "^[0-9]+" $value -}}
{{- $factors := dict "" 1 "b" 1 "kb" 1024 "mb" 1048576 "gb" 1073741824 "k" 1000 "m" 1000000 "g" 1000000000 -}}
{{- mul (atoi $number) (get $factors (trimPrefix $number $value)) -}}
{{- end -}}

{{/*
Bytes of a Kubernetes quantity, such as a container's memory limit (rounded up to a whole byte,
as the kubelet does): a decimal number, then one of the suffixes Ki Mi Gi Ti Pi Ei (1024-based),
n u m k M G T P E (1000-based), or a decimal exponent (1e9, 1.5E9); values.yaml's YAML numbers
reach the template as such exponents.
*/}}
{{- define "chamvi.kubeQuantityBytes" -}}
{{- $value := toString . -}}
{{- $number := regexFind "^[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)" $value -}}
{{- $suffix := trimPrefix $number $value -}}
{{- $factors := dict "" 1.0 "n" 0.000000001 "u" 0.000001 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if not $number -}}
{{- fail (printf "%q is not a Kubernetes quantity (such as 768Mi or 1Gi)" $value) -}}
{{- else if regexMatch "^[eE][+-]?[0-9]+$" $suffix -}}
{{- ceil (float64 $value) | int64 -}}
{{- else if hasKey $factors $suffix -}}
{{- ceil (mulf (float64 $number) (get $factors $suffix)) | int64 -}}
{{- else -}}
{{- fail (printf "%q is not a Kubernetes quantity (such as 768Mi or 1Gi)" $value) -}}
{{- end -}}
{{- end -}}
