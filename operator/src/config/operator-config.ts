// The operator's configuration (API.md "Operator configuration"): one zod schema, read
// from a YAML file and/or environment variables at start-up. A bad value stops the
// process with a message naming the key, before anything touches the cluster. The Helm
// chart's values.schema.json is generated from it (chart-values-schema.ts, make chart-schema):
// every describe() here is what the chart's schema says of the key.
import { isIP } from 'node:net';
import { z } from 'zod';
import { ENDPOINT_PATTERN_SHAPE, parseEndpointPattern } from '../reconcile/model-endpoints.ts';
import { ALLOW_REPO_PATTERN_CHARACTERS, allowRepoPatternProblem } from '../reconcile/allow-repo.ts';
import { objectName } from '../api/kubernetes-names.ts';
import { EGRESS_PATTERN, EGRESS_PATTERN_MESSAGE } from '../api/egress-pattern.ts';
import { FORGE_HOST_PATTERN, FORGE_KINDS } from '../publish/forge-kinds.ts';

/**
 * The default of namespaceMaxStateBytes, sized for the chart's bundled Redis (maxmemory 512mb,
 * noeviction: full, it refuses every write, the queue's and every run's state alike). Three
 * eighths of it: two namespaces at their budget leave the last quarter to the others' runs and
 * BullMQ's jobs and locks (the chart refuses a larger budget with its Redis), and one busy
 * namespace has room (100 runs of a 128k-token window take 50 to 300 MiB; 64 MiB failed
 * healthy runs of one busy namespace, about 26 of 2.5 MiB each, with Redis half empty).
 * More namespaces near their budget still fill Redis together: raise maxmemory with the
 * number of busy namespaces, or lower this (docs/operations.md "Sizing Redis").
 */
export const DEFAULT_NAMESPACE_MAX_STATE_BYTES = 192 * 1024 * 1024;

/** The default of maxApprovalWaitSeconds: a week, spec.approval.timeout's longest. */
export const DEFAULT_MAX_APPROVAL_WAIT_SECONDS = 7 * 24 * 3600;
/**
 * The most maxApprovalWaitSeconds may be: 30 days, budget.timeout's longest. A sandbox pod's
 * activeDeadlineSeconds (budget.timeout plus this, plus the graces) then stays far under the
 * 2^31 - 1 the API server takes.
 */
const MAX_APPROVAL_WAIT_SECONDS_LIMIT = 30 * 24 * 3600;

/** host:port: a DNS name or IPv4 address, or an IPv6 address in brackets (passed to bash's /dev/tcp, so nothing else). */
export const ISOLATION_PROBE_TARGET = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}$/;

/** A label key as Kubernetes takes it: an optional DNS-subdomain prefix and a name of at most 63. */
const LABEL_KEY =
  /^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
const labelKey = z.string().max(317).regex(LABEL_KEY, 'must be a label key, such as chamvi.dev/node or kubernetes.io/os');
const labelValue = z.string().max(63).regex(LABEL_VALUE, 'must be a label value (at most 63 letters, digits, -, _ or .)');

/** core/v1 Toleration, strictly: a typo (tolerationSecond) fails at start-up instead of tolerating nothing. */
const toleration = z
  .object({
    key: labelKey.optional(),
    operator: z.enum(['Exists', 'Equal']).optional(),
    value: labelValue.optional(),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
    tolerationSeconds: z.number().int().optional(),
  })
  .strict()
  .refine((t) => !(t.operator === 'Exists' && t.value), { message: 'a toleration with operator Exists takes no value' })
  .refine((t) => t.key !== undefined || t.operator === 'Exists', { message: 'a toleration without a key needs operator Exists' });

const positiveInt = (description: string, fallback: number, max = 1_000_000) =>
  z.coerce.number().int().min(1).max(max).default(fallback).describe(description);

/** A namespace name: an RFC 1123 label. */
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** A Kubernetes quantity as the size limits use one: a number and an optional suffix. */
const QUANTITY = /^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$/;

/**
 * A check only code can make (superRefine) has no JSON Schema; its first, character-level
 * part is given to the chart's schema as a pattern, so `helm install` refuses what can
 * never pass. The pattern is the very regex the code checks first, never a copy.
 */
const chartPattern = (pattern: RegExp) => ({ pattern: pattern.source });

const egressPatterns = (description: string) =>
  z
    .array(z.string().min(1).max(261).regex(EGRESS_PATTERN, EGRESS_PATTERN_MESSAGE).meta(chartPattern(EGRESS_PATTERN)))
    .max(1000)
    .default([])
    .describe(description);

export const operatorConfigSchema = z
  .object({
    allowRepo: z
      .array(
        // Security #11.2: a pattern must be a canonical URL with wildcards (reconcile/allow-repo.ts).
        z
          .string()
          .min(1)
          .max(2048)
          .superRefine((pattern, ctx) => {
            const problem = allowRepoPatternProblem(pattern);
            if (problem) ctx.addIssue({ code: 'custom', message: problem });
          })
          .meta(chartPattern(ALLOW_REPO_PATTERN_CHARACTERS))
          .describe('A canonical URL with wildcards, such as https://github.com/acme/* or git@github.com:acme/*.'),
      )
      .default([])
      .describe('Glob patterns a canonical repository URL must match (https://github.com/acme/*). Empty: nothing is allowed.'),
    /** Security #11.7: the clone lands on the operator's own disk, shared by every run of the replica. */
    maxCheckoutBytes: z.coerce
      .number()
      .int()
      .min(1024 * 1024)
      .max(1024 ** 4)
      .default(1024 ** 3)
      .describe("Largest checkout a run's clone may have (sum of the commit's file sizes) and largest download; larger fails CloneFailed."),
    maxCheckoutFiles: positiveInt("Most files a run's clone may check out; more fails CloneFailed.", 250_000, 100_000_000),
    /** Each git the workers run on a repository's objects (workers/git-limits.ts), in the operator's container. */
    maxGitMemoryBytes: z.coerce
      .number()
      .int()
      .min(16 * 1024 * 1024)
      .max(64 * 1024 ** 3)
      .default(64 * 1024 * 1024)
      .describe(
        "Heap each git the workers run on a repository's objects may have (ulimit -d): the clone, ls-remote, publishing's git and git apply of a run's diff (publish, continueFrom). " +
          'A repository that needs more (a commit or tree of tens of MB, a large file sent as a delta of another) fails CloneFailed; ' +
          'a diff whose git apply would need more (a change to a file over about 17 MiB at 64 MiB) fails InvalidSpec or PublishFailed, saying so. ' +
          'workerConcurrency gits may run at once beside the operator: raise resources.limits.memory with it.',
      ),
    /** The conversation a run keeps is in the operator's heap and Redis (workers/run-state.ts). */
    maxContextWindow: z.coerce
      .number()
      .int()
      .min(1024)
      .max(10_000_000)
      .default(1_000_000)
      .describe(
        "Largest spec.model.contextWindow (tokens) a run may ask for; larger fails InvalidSpec. A run's conversation grows to about its " +
          "window before older turns are summarised, and is held in the operator's heap and in Redis while the run steps (4 to 24 bytes " +
          'a token): raise the heap limit with this.',
      ),
    /** Issue #17.3: workers/clone-cache.ts. */
    cloneCacheMaxBytes: z.coerce
      .number()
      .int()
      .min(0)
      .max(1024 ** 4)
      .default(0)
      .describe(
        "Bytes of earlier clones' archives each replica keeps in /tmp, by repository and commit, so a run of a commit cloned before skips the clone. " +
          "A kept archive is used only for the commit the remote names for the run, asked with the run's own credential. 0: off.",
      ),
    sandboxImage: z.string().min(1).default('ghcr.io/chamvi/chamvi-sandbox:0.1.0').describe('Default sandbox image.'),
    /** Security #11.10: see reconcile/allow-images.ts. */
    allowImages: z
      .array(
        z
          .string()
          .min(1)
          .max(1024)
          .regex(/^[^\s]+$/, 'must be an image pattern without spaces'),
      )
      .default([])
      .describe(
        'Glob patterns of sandbox images a run may name besides sandboxImage (registry.example/team/*; * stays within a path segment, ** crosses). ' +
          'Empty: only sandboxImage. Listed images are pulled with imagePullPolicy Always.',
      ),
    /** See reconcile/allow-runtime-class.ts. */
    allowRuntimeClasses: z
      .array(z.string().min(1).max(253))
      .max(64)
      .default([])
      .describe(
        "RuntimeClasses a run may name in spec.sandbox.runtimeClassName besides sandboxPlacement.runtimeClassName and the classes of the warm pools in the run's namespace " +
          '(a class other than the sandboxing runtime an admin set would step out of it). Empty: only those.',
      ),
    /** Security #11.3: see reconcile/model-endpoints.ts. */
    allowModelEndpoints: z
      .array(
        z
          .string()
          .min(1)
          .max(2048)
          .superRefine((pattern, ctx) => {
            const parsed = parseEndpointPattern(pattern);
            if ('refused' in parsed)
              ctx.addIssue({ code: 'custom', message: `${JSON.stringify(pattern)} is refused because ${parsed.refused}` });
          })
          .meta(chartPattern(ENDPOINT_PATTERN_SHAPE)),
      )
      .default([])
      .describe(
        'Model endpoints a run may name in spec.model.baseURL, as canonical URLs: scheme, host and port exact, the path a prefix ' +
          '(* one segment, ** any), such as https://llm.internal/v1. Empty: no run-set endpoint (openai-compatible is refused).',
      ),
    /** Issue #12: see reconcile/allow-egress.ts and egress/. */
    allowEgress: egressPatterns(
      'Host patterns (registry.npmjs.org, *.pythonhosted.org, proxy.golang.org:443, *) that runs may list in spec.sandbox.egress.allow; ' +
        'a run asking beyond them fails InvalidSpec. Empty: no run gets egress.',
    ),
    egressProxy: z
      .object({
        host: z
          .string()
          .min(1)
          .max(253)
          .regex(/^[A-Za-z0-9.-]+$/, 'must be a host name or IPv4 address')
          .optional()
          .describe(
            'Where sandboxes reach the egress proxy, such as chamvi-egress-proxy.chamvi-system.svc. Unset: runs asking for egress fail.',
          ),
        address: z
          .string()
          .refine((value) => isIP(value) !== 0, 'must be an IP address')
          .optional()
          .describe(
            "The proxy's IP address as sandboxes use it (they have no DNS), fixed. Default: the ClusterIP of service, or host resolved, read again for each new sandbox (cached 5 s).",
          ),
        service: z
          .string()
          .min(1)
          .max(63)
          .regex(/^[a-z]([-a-z0-9]*[a-z0-9])?$/, 'must be a Service name (a DNS-1035 label)')
          .optional()
          .describe(
            "Name of the proxy's Service in namespace: its ClusterIP is read from the API server for each new sandbox (cached 5 s), so a Service created again with a new address is followed. The chart sets it.",
          ),
        port: z.coerce.number().int().min(1).max(65535).default(3128).describe('Port of the egress proxy Service.'),
        ipBlock: z
          .string()
          .regex(/^[0-9a-fA-F.:]+\/[0-9]{1,3}$/, 'must be a CIDR such as 192.0.2.2/32')
          .optional()
          .describe(
            'For a proxy outside the cluster: the sandbox NetworkPolicy allows egress to this CIDR (on port) instead of to the proxy pods.',
          ),
        namespace: z
          .string()
          .min(1)
          .max(63)
          .regex(NAMESPACE_NAME)
          .default('chamvi-system')
          .describe("Namespace of the proxy's pods, for the sandbox NetworkPolicy's egress rule."),
        podLabels: z
          .record(labelKey, labelValue)
          .default({ 'app.kubernetes.io/name': 'chamvi-egress-proxy' })
          .describe("Labels of the proxy's pods, for the sandbox NetworkPolicy's egress rule."),
        targetPort: z.coerce
          .number()
          .int()
          .min(1)
          .max(65535)
          .optional()
          .describe("Port the proxy's pods listen on (the NetworkPolicy names pod ports, not Service ports). Default: port."),
      })
      .strict()
      .prefault({})
      .describe('The egress proxy (a Deployment of the chart) that runs with spec.sandbox.egress.allow reach the network through.'),
    egressKey: z
      .string()
      .min(32, 'must be at least 32 characters (the chart generates 64)')
      .optional()
      .describe(
        "Key of the HMAC that makes each run's proxy credential; the egress proxy needs the same. Give it as env CHAMVI_EGRESS_KEY from a Secret.",
      ),
    /** Issue #14: see publish/. */
    publish: z
      .object({
        author: z
          .object({
            name: z.string().min(1).max(256).default('chamvi-operator').describe('Author and committer name of published commits.'),
            email: z
              .string()
              .min(3)
              .max(256)
              .regex(/^[^\s<>@]+@[^\s<>@]+$/, 'must be an email address')
              .default('chamvi-operator@users.noreply.chamvi.dev')
              .describe('Author and committer email of published commits.'),
          })
          .strict()
          .prefault({})
          .describe('Who published commits are by (spec.publish). The run and its uid are in the commit message.'),
        forges: z
          .array(
            z
              .object({
                host: z
                  .string()
                  .min(1)
                  .max(261)
                  .regex(FORGE_HOST_PATTERN, 'must be a host, *.domain, or either with :port, such as git.internal:3000')
                  .meta(chartPattern(FORGE_HOST_PATTERN))
                  .describe(
                    'Host of repository URLs this entry is for: a name, *.domain (names under it), with :port when the URL has one.',
                  ),
                kind: z.enum(FORGE_KINDS).describe('The API the host speaks: github, gitlab, or gitea (also Forgejo).'),
                apiURL: z
                  .string()
                  .regex(/^https?:\/\/[^\s]+$/, 'must be an http(s) URL')
                  .optional()
                  .describe(
                    "Base URL of its API. Default: https://api.github.com for github.com, else the repository's origin with /api/v3 " +
                      "(github), /api/v4 (gitlab) or /api/v1 (gitea). The run's push token is sent there.",
                  ),
              })
              .strict(),
          )
          .max(100)
          .default([])
          .describe(
            'Which forge API each repository host speaks, first match wins; github.com and gitlab.com are known without an entry. ' +
              'A run whose spec.publish.pullRequest names a repository on no listed host fails PublishFailed saying so.',
          ),
      })
      .strict()
      .prefault({})
      .describe('Publishing runs as branches and pull requests (spec.publish).'),
    redisUrl: z
      .string()
      .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
      .default('redis://127.0.0.1:6379'),
    /** Security #11.1: Redis holds every run's state and queue; see workers/redis-connection.ts. */
    redisPassword: z
      .string()
      .min(1)
      .optional()
      .describe('Redis password (AUTH), when not in redisUrl. Give it as env REDIS_PASSWORD from a Secret, never in the config file.'),
    redisCaFile: z
      .string()
      .min(1)
      .optional()
      .describe('PEM file of the CA that signed a rediss:// server certificate; default: the system CAs.'),
    redisSentinels: z
      .array(z.string().min(3))
      .optional()
      .describe(
        'Redis behind Sentinel: the Sentinels as host:port. The operator asks them for the master (redisSentinelMaster) and follows a failover. redisUrl then gives only the scheme (rediss: for TLS) and the credentials.',
      ),
    redisSentinelMaster: z.string().min(1).default('mymaster').describe('With redisSentinels: the master name the Sentinels monitor.'),
    redisSentinelPassword: z
      .string()
      .min(1)
      .optional()
      .describe(
        "With redisSentinels: the Sentinels' own password, when they have one. Give it as env REDIS_SENTINEL_PASSWORD from a Secret.",
      ),
    redisClusterNodes: z
      .array(z.string().min(3))
      .optional()
      .describe(
        'A Redis Cluster: some of its nodes as host:port (the rest are discovered). Keys are prefixed with the hash tag {redisPrefix}, so each install lives in one slot. redisUrl then gives only the scheme and the credentials.',
      ),
    /**
     * workers/worker-stop.ts: a stopping replica whose workers hold no job ends its stop once
     * Redis has been unreachable this long (BullMQ's close never answers without Redis). Too
     * short, a failover during a rollout ends stops early; too long, a Redis that is gone holds
     * the pod until the shutdown's deadline, which bounds it anyway.
     */
    redisFailoverSeconds: z.coerce
      .number()
      .int()
      .min(1)
      .max(3600)
      .optional()
      .describe(
        'How long a Redis failover leaves Redis unreachable: a stopping replica whose workers hold no step takes Redis as gone, and exits, ' +
          'only once it has been unreachable this long (a stop ended during a failover leaves a job a fetch took then locked, ' +
          'unstarted, until jobLockSeconds). Unset: 2 for one server or a Cluster, 40 with redisSentinels; set it to your ' +
          "Sentinels' down-after-milliseconds plus the failover, or for a managed Redis that fails over behind one address. " +
          'Cut, with a warning at start-up, when it would not end before the time a shutdown gives the steps in flight ' +
          '(shutdownTimeoutSeconds less 3 s): to shutdownTimeoutSeconds less 4 s, in a shutdown of 6 s or more.',
      ),
    allowInsecureRedis: z
      .boolean()
      .default(false)
      .describe(
        'Accept a Redis URL with no password (and no redisPassword). Anyone who can reach such a Redis can stop or stall every run.',
      ),
    stateKey: z
      .string()
      .min(32, 'must be at least 32 characters (the chart generates 64)')
      .optional()
      .describe('Key of the HMAC-SHA256 that seals run state and job data in Redis; every replica needs the same. Unset: one per process.'),
    workerConcurrency: positiveInt('Step jobs per replica at once.', 8, 1000),
    workersEnabled: z
      .boolean()
      .default(true)
      .describe('Run agent workers in this replica. Off splits controller and worker replicas (or freezes runs for a test).'),
    jobLockSeconds: z.coerce
      .number()
      .int()
      .min(2)
      .max(600)
      .default(30)
      .describe('A job whose worker stops renewing its lock this long is taken over by another worker.'),
    /**
     * On SIGTERM the workers stop taking jobs and the steps in flight run on until they end or
     * this long has passed; then the process exits, and a step cut short is redone elsewhere
     * once its job lock expires. 25 fits Kubernetes' default terminationGracePeriodSeconds (30);
     * the chart sets it from its own (terminationGracePeriodSeconds − 5).
     */
    shutdownTimeoutSeconds: z.coerce
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(25)
      .describe(
        "Seconds a stopping operator lets the steps in flight finish before it exits; keep it a few seconds below the pod's " +
          'terminationGracePeriodSeconds (the chart sets it from that).',
      ),
    maxActiveRuns: positiveInt('Runs provisioned at once per cluster.', 100),
    namespaceMaxActiveRuns: z.coerce
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .optional()
      .describe(
        'Runs of one namespace provisioned at once, for a namespace without the chamvi.dev/max-active-runs annotation (which wins). Unset: only maxActiveRuns, so the namespace that comes first may hold every slot until its runs end.',
      ),
    /** workers/run-state.ts: one namespace's runs must not fill the Redis every namespace's runs share. */
    namespaceMaxStateBytes: z.coerce
      .number()
      .int()
      .min(1024 * 1024)
      .max(1024 ** 4)
      .default(DEFAULT_NAMESPACE_MAX_STATE_BYTES)
      .describe(
        "Bytes of saved run state (each run's conversation, kept in Redis while it runs) one namespace's runs may hold together. " +
          'A save that would take the namespace past it fails that run BudgetExceeded, so one namespace cannot fill the Redis ' +
          "every run shares. Keep Redis's maxmemory above the sum over the namespaces that run at once, with room for the queue.",
      ),
    watchNamespaces: z
      .array(z.string().min(1).max(63).regex(NAMESPACE_NAME, 'must be a namespace name (lower-case letters, digits and -)'))
      .default([])
      // A namespace listed twice had its runs listed twice by the merged caches, which halved
      // maxActiveRuns and the evals' parallelism.
      .refine((names) => new Set(names).size === names.length, 'lists a namespace more than once')
      .describe('Namespaces to watch; empty means all.'),
    /** Where sandbox (and isolation probe) pods run; see reconcile/sandbox-placement.ts. */
    sandboxPlacement: z
      .object({
        nodeSelector: z
          .record(labelKey, labelValue)
          .default({})
          .describe('Node labels a sandbox pod requires (pod spec nodeSelector), such as a pool of sandbox nodes.'),
        tolerations: z.array(toleration).max(32).default([]).describe('Tolerations of sandbox pods, for tainted sandbox nodes.'),
        runtimeClassName: objectName('RuntimeClass')
          .optional()
          .describe(
            'RuntimeClass of sandbox pods (gvisor, kata) when the run names none. A run may name only this one, the class of a warm pool in its namespace or one in allowRuntimeClasses.',
          ),
        priorityClassName: objectName('PriorityClass').optional().describe('PriorityClass of sandbox pods.'),
      })
      .strict()
      .prefault({})
      .describe('Where sandbox pods (and isolation probe pods, so the verdict is about the same nodes) run.'),
    /** Warm sandbox pools (reconcile/warm-pool.ts, docs/warm-pools.md). */
    warmPools: z
      .array(
        z
          .object({
            name: z
              .string()
              .min(1)
              .max(40)
              .regex(NAMESPACE_NAME, 'must be lower-case letters, digits and -')
              .describe('Pool name, unique per namespace; pods are named <name>-warm-<random>.'),
            namespace: z
              .string()
              .min(1)
              .max(63)
              .regex(NAMESPACE_NAME, 'must be a namespace name (lower-case letters, digits and -)')
              .describe('The namespace whose runs the pool serves (a pod cannot change namespace); its pods count against its quota.'),
            size: z.coerce.number().int().min(0).max(1000).describe('Ready unclaimed pods to keep; 0 empties the pool.'),
            image: z.string().min(1).optional().describe("The pool's image; unset: sandboxImage."),
            runtimeClassName: objectName('RuntimeClass').optional().describe("The pool's RuntimeClass; unset: sandboxPlacement's."),
          })
          .strict(),
      )
      .max(64)
      .default([])
      .refine(
        (pools) => new Set(pools.map((pool) => `${pool.namespace}/${pool.name}`)).size === pools.length,
        'two pools have the same namespace and name',
      )
      .describe(
        'Warm sandbox pools: ready pods per namespace and image, each claimed by one run whose pod would be the same ' +
          '(no spec.sandbox env, egress or resources of its own), so the run skips pod start. Empty: no pools.',
      ),
    networkPolicy: z
      .boolean()
      .default(true)
      .describe(
        'Fence sandboxes in: one deny-all NetworkPolicy per run namespace, selecting every sandbox pod (and one allowing the egress proxy to runs with egress).',
      ),
    /**
     * Security #11.8: a NetworkPolicy isolates nothing where no CNI enforces it. Runs start only
     * where a probe showed enforcement, unless an admin accepts unisolated sandboxes here.
     */
    allowUnisolatedSandboxes: z
      .boolean()
      .default(false)
      .describe(
        'Start sandboxes where NetworkPolicy is not enforced, or with networkPolicy false. Such a sandbox reaches Redis, ' +
          'cloud metadata, the API server, internal services and the internet.',
      ),
    isolationProbe: z
      .object({
        target: z
          .string()
          .regex(ISOLATION_PROBE_TARGET, 'must be host:port, such as 10.0.0.5:8080, operator.chamvi-system.svc:8080 or [fd00::5]:8080')
          .optional()
          .describe(
            'What the probe pod tries to reach: an address every pod reaches when no policy applies. Unset: this operator pod (POD_IP) on httpPort.',
          ),
        maxAgeSeconds: positiveInt('A namespace is probed again once its verdict is this old.', 600, 86_400),
        settleSeconds: z.coerce
          .number()
          .int()
          .min(1)
          .max(300)
          .default(10)
          .describe(
            'How long the probe keeps trying to connect after its deny policy exists before it concludes the policy is not enforced.',
          ),
        timeoutSeconds: positiveInt(
          'Longest one probe may take (pod scheduled, image pulled, connections tried) before it gives up undecided.',
          180,
          3600,
        ),
      })
      .strict()
      .prefault({})
      .describe('How the operator checks that NetworkPolicy is enforced in a namespace before a run there gets a sandbox.'),
    // The dev cluster points toolboxCommand at the locally built toolbox, which kwok's exec
    // runs on this machine. node by its absolute path: pods/exec looks a bare name up on the
    // container's PATH, which is the run's (spec.sandbox.env), and a PATH starting in the
    // workspace ran a committed .venv/bin/node as the toolbox. /opt/chamvi/node is node in every
    // sandbox: a link in the default image, the copy the init container makes for a custom one.
    toolboxCommand: z
      .array(z.string().min(1))
      .min(1)
      .default(['/opt/chamvi/node', '/opt/chamvi/toolbox.mjs'])
      .describe(
        "How the sandbox runs the toolbox: in the pod, the bundled file in the sandbox image. Name programs by absolute path: a bare name is looked up on the run's PATH.",
      ),
    sandboxNodePath: z
      .string()
      .min(1)
      .default('/usr/local/bin/node')
      .describe('Path of node in the sandbox image (the container idles on it).'),
    workspaceSizeLimit: z
      .string()
      .regex(QUANTITY, 'must be a quantity such as 10Gi')
      .default('10Gi')
      .describe("emptyDir size limit of each sandbox's workspace."),
    homeSizeLimit: z
      .string()
      .regex(QUANTITY, 'must be a quantity such as 1Gi')
      .default('1Gi')
      .describe("emptyDir size limit of each sandbox's home (the toolbox's state and logs)."),
    leaderElection: z
      .object({
        enabled: z.boolean().default(true),
        namespace: z.string().min(1).default('chamvi-system'),
        leaseName: z.string().min(1).default('chamvi-operator'),
        leaseDurationSeconds: positiveInt('Lease duration.', 15, 3600),
        renewDeadlineSeconds: positiveInt('Renew deadline.', 10, 3600),
        retryPeriodSeconds: positiveInt('Retry period.', 2, 3600),
      })
      // As client-go requires: a renew deadline as long as the lease let a standby take the
      // lease while the leader, still within its deadline, went on acting.
      .refine((election) => election.leaseDurationSeconds > election.renewDeadlineSeconds, {
        message: 'leaseDurationSeconds must be greater than renewDeadlineSeconds (or two replicas lead at once)',
        path: ['renewDeadlineSeconds'],
      })
      .refine((election) => election.renewDeadlineSeconds > election.retryPeriodSeconds, {
        message: 'renewDeadlineSeconds must be greater than retryPeriodSeconds (a leader must get more than one try to renew)',
        path: ['retryPeriodSeconds'],
      })
      .prefault({}),
    identity: z
      .string()
      .min(1)
      .default(() => `${process.env.HOSTNAME ?? 'operator'}-${process.pid}`),
    reconcileConcurrency: positiveInt('Runs reconciled at once.', 4, 100),
    /**
     * A run holds a sandbox slot from its admission; a pod that never becomes Ready (an image
     * that cannot be pulled, a pod no node takes) held it until budget.timeout, which a run
     * author chooses (up to 720h) while other namespaces' runs queued.
     */
    sandboxReadyTimeoutSeconds: z.coerce
      .number()
      .int()
      .min(30)
      .max(86_400)
      .default(900)
      .describe(
        "Seconds from a run's start (its admission) until its sandbox pod must be Ready; past it the run fails SandboxNotReady and frees its slot. Default 900.",
      ),
    /**
     * Time waiting for a human does not count against budget.timeout: it moves the run's
     * deadline on. Unbounded, a run that asked again at every step held its slot of
     * maxActiveRuns and its sandbox pod for maxSteps × approval.timeout (up to 19 years) at no
     * token cost. A week by default: the longest approval.timeout a run may set, so one such
     * wait is never cut short, and a weekend's waits fit.
     */
    maxApprovalWaitSeconds: z.coerce
      .number()
      .int()
      .min(60)
      .max(MAX_APPROVAL_WAIT_SECONDS_LIMIT)
      .default(DEFAULT_MAX_APPROVAL_WAIT_SECONDS)
      .describe(
        "Seconds one run may wait for approvals in all, summed over its waits; they move the run's deadline on, and its sandbox pod's " +
          'activeDeadlineSeconds is budget.timeout plus this. A wait that would pass it is denied as at spec.approval.timeout ' +
          '(the run goes on, on its own time), and so is every later one at once. 60 to 2592000, default 604800 (7 days).',
      ),
    /**
     * The chart's approvalPolicy.separationOfDuties, which it sets here too. The policy judges an
     * answer when it is written, from the run as stored then, and a run made from a template
     * names its writer only once the operator has accepted it (status.template.writtenBy); the
     * operator checks again when it acts on the answer, with everything recorded by then.
     */
    approvalSeparationOfDuties: z
      .boolean()
      .default(false)
      .describe(
        "Ignore an approval answer given by the run's creator (chamvi.dev/created-by) or by the writer of the template its task " +
          'came from, and one that names no approver: they are ignored with an ApprovalIgnored Event. The chart sets it from ' +
          'approvalPolicy.separationOfDuties.',
      ),
    /**
     * The agent stops a run at budget.timeout and takes its partial diff. The controller
     * steps in only this much later (a dead worker), and the pod's activeDeadlineSeconds
     * is later still, so the diff can be taken.
     */
    deadlineGraceSeconds: z.coerce
      .number()
      .int()
      .min(0)
      .max(3600)
      .default(60)
      .describe('Seconds after budget.timeout before the controller fails a run whose worker died.'),
    /**
     * A model that accepts a request and never answers ends as ModelUnavailable instead of
     * holding a worker slot until budget.timeout.
     */
    modelCallTimeoutSeconds: z.coerce
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(300)
      .describe(
        'One model call attempt (request until the whole answer) may take this long before it is cut and retried (then ModelUnavailable).',
      ),
    /**
     * spec.sandbox.setup is killed after this long and the run fails SetupFailed ("timed
     * out"). 30 minutes is also the toolbox's own cap on one bash command.
     */
    setupTimeoutSeconds: z.coerce
      .number()
      .int()
      .min(1)
      .max(1800)
      .default(1800)
      .describe('spec.sandbox.setup is killed after this long and the run fails SetupFailed.'),
    redisPrefix: z
      .string()
      .min(1)
      .regex(/^[A-Za-z0-9_-]+$/)
      .default('chamvi')
      .describe('BullMQ queue and run-state key prefix in Redis: lets two installs share one Redis (tests give each run its own).'),
    httpPort: z.coerce.number().int().min(0).max(65535).default(8080),
  })
  .strict();

export type OperatorConfig = z.output<typeof operatorConfigSchema>;

/** Environment variables and the config keys they set. Lists are comma-separated. */
const ENV_KEYS: Record<string, { key: string; list?: boolean; boolean?: boolean }> = {
  CHAMVI_ALLOW_REPO: { key: 'allowRepo', list: true },
  CHAMVI_MAX_CHECKOUT_BYTES: { key: 'maxCheckoutBytes' },
  CHAMVI_MAX_CHECKOUT_FILES: { key: 'maxCheckoutFiles' },
  CHAMVI_MAX_GIT_MEMORY_BYTES: { key: 'maxGitMemoryBytes' },
  CHAMVI_CLONE_CACHE_MAX_BYTES: { key: 'cloneCacheMaxBytes' },
  CHAMVI_MAX_CONTEXT_WINDOW: { key: 'maxContextWindow' },
  CHAMVI_SANDBOX_IMAGE: { key: 'sandboxImage' },
  CHAMVI_ALLOW_IMAGES: { key: 'allowImages', list: true },
  CHAMVI_ALLOW_MODEL_ENDPOINTS: { key: 'allowModelEndpoints', list: true },
  CHAMVI_ALLOW_EGRESS: { key: 'allowEgress', list: true },
  CHAMVI_EGRESS_KEY: { key: 'egressKey' },
  REDIS_URL: { key: 'redisUrl' },
  REDIS_PASSWORD: { key: 'redisPassword' },
  CHAMVI_REDIS_CA_FILE: { key: 'redisCaFile' },
  REDIS_SENTINELS: { key: 'redisSentinels', list: true },
  REDIS_SENTINEL_MASTER: { key: 'redisSentinelMaster' },
  REDIS_SENTINEL_PASSWORD: { key: 'redisSentinelPassword' },
  REDIS_CLUSTER_NODES: { key: 'redisClusterNodes', list: true },
  CHAMVI_REDIS_FAILOVER_SECONDS: { key: 'redisFailoverSeconds' },
  CHAMVI_ALLOW_INSECURE_REDIS: { key: 'allowInsecureRedis', boolean: true },
  CHAMVI_STATE_KEY: { key: 'stateKey' },
  CHAMVI_WORKER_CONCURRENCY: { key: 'workerConcurrency' },
  CHAMVI_MAX_ACTIVE_RUNS: { key: 'maxActiveRuns' },
  CHAMVI_NAMESPACE_MAX_ACTIVE_RUNS: { key: 'namespaceMaxActiveRuns' },
  CHAMVI_NAMESPACE_MAX_STATE_BYTES: { key: 'namespaceMaxStateBytes' },
  CHAMVI_WATCH_NAMESPACES: { key: 'watchNamespaces', list: true },
  CHAMVI_NETWORK_POLICY: { key: 'networkPolicy', boolean: true },
  CHAMVI_ALLOW_UNISOLATED_SANDBOXES: { key: 'allowUnisolatedSandboxes', boolean: true },
  CHAMVI_WORKERS_ENABLED: { key: 'workersEnabled', boolean: true },
  CHAMVI_JOB_LOCK_SECONDS: { key: 'jobLockSeconds' },
  CHAMVI_SHUTDOWN_TIMEOUT_SECONDS: { key: 'shutdownTimeoutSeconds' },
  CHAMVI_IDENTITY: { key: 'identity' },
  CHAMVI_HTTP_PORT: { key: 'httpPort' },
  CHAMVI_DEADLINE_GRACE_SECONDS: { key: 'deadlineGraceSeconds' },
  CHAMVI_MAX_APPROVAL_WAIT_SECONDS: { key: 'maxApprovalWaitSeconds' },
  CHAMVI_MODEL_CALL_TIMEOUT_SECONDS: { key: 'modelCallTimeoutSeconds' },
  CHAMVI_SETUP_TIMEOUT_SECONDS: { key: 'setupTimeoutSeconds' },
  CHAMVI_REDIS_PREFIX: { key: 'redisPrefix' },
};

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  static isInstance(error: unknown): error is ConfigError {
    return error instanceof Error && error.name === 'ConfigError';
  }
}

function fromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [variable, { key, list, boolean }] of Object.entries(ENV_KEYS)) {
    const raw = env[variable];
    if (raw === undefined || raw === '') continue;
    if (list)
      values[key] = raw
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);
    else if (boolean) {
      if (raw !== 'true' && raw !== 'false')
        throw new ConfigError(`config key ${key} (env ${variable}): must be true or false, got ${JSON.stringify(raw)}`);
      values[key] = raw === 'true';
    } else values[key] = raw;
  }
  if (env.CHAMVI_TOOLBOX_COMMAND) values.toolboxCommand = env.CHAMVI_TOOLBOX_COMMAND.split(' ').filter(Boolean);
  if (env.CHAMVI_EGRESS_PROXY_HOST) values.egressProxy = { host: env.CHAMVI_EGRESS_PROXY_HOST };
  if (env.CHAMVI_EGRESS_PROXY_PORT)
    values.egressProxy = { ...(values.egressProxy as object | undefined), port: env.CHAMVI_EGRESS_PROXY_PORT };
  // publish: the forges as JSON ([{"host":"git.internal","kind":"gitea"}]), the author by parts.
  if (env.CHAMVI_PUBLISH_FORGES || env.CHAMVI_PUBLISH_AUTHOR_NAME || env.CHAMVI_PUBLISH_AUTHOR_EMAIL) {
    let forges: unknown;
    try {
      forges = env.CHAMVI_PUBLISH_FORGES ? JSON.parse(env.CHAMVI_PUBLISH_FORGES) : undefined;
    } catch {
      throw new ConfigError(
        'config key publish.forges (env CHAMVI_PUBLISH_FORGES): must be JSON, such as [{"host":"git.internal","kind":"gitea"}]',
      );
    }
    const author = {
      ...(env.CHAMVI_PUBLISH_AUTHOR_NAME ? { name: env.CHAMVI_PUBLISH_AUTHOR_NAME } : {}),
      ...(env.CHAMVI_PUBLISH_AUTHOR_EMAIL ? { email: env.CHAMVI_PUBLISH_AUTHOR_EMAIL } : {}),
    };
    values.publish = { ...(forges !== undefined ? { forges } : {}), author };
  }
  if (env.CHAMVI_LEADER_ELECTION === 'false') values.leaderElection = { enabled: false };
  if (env.CHAMVI_LEADER_ELECTION_NAMESPACE) {
    values.leaderElection = { ...(values.leaderElection as object | undefined), namespace: env.CHAMVI_LEADER_ELECTION_NAMESPACE };
  }
  return values;
}

const isMapping = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * `over`'s keys over `base`'s, mappings merged key by key: CHAMVI_EGRESS_PROXY_HOST sets
 * egressProxy.host and keeps the file's egressProxy.service. Replacing whole sections dropped
 * the file's publish.forges, the proxy's service and the lease name without a word. Lists
 * and values are replaced.
 */
function overlay(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const merged = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const under = merged[key];
    merged[key] = isMapping(under) && isMapping(value) ? overlay(under, value) : value;
  }
  return merged;
}

/**
 * The config from a parsed YAML file (may be empty) overlaid with environment variables.
 * Throws ConfigError naming the first bad key.
 */
export function loadOperatorConfig(file: unknown, env: NodeJS.ProcessEnv): OperatorConfig {
  if (file !== undefined && file !== null && (typeof file !== 'object' || Array.isArray(file))) {
    throw new ConfigError('config file: must be a YAML mapping of keys such as allowRepo, redisUrl, maxActiveRuns');
  }
  const merged = overlay((file as Record<string, unknown> | null) ?? {}, fromEnv(env));
  const result = operatorConfigSchema.safeParse(merged);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const key = issue.path.join('.') || (issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : '(root)');
    throw new ConfigError(`config key ${key}: ${issue.message}`);
  }
  // A pool in a namespace the operator does not watch has no pod cache and no RBAC there: its
  // pass only logged 403s, and no run could claim from it.
  const { warmPools, watchNamespaces } = result.data;
  const unwatched = watchNamespaces.length > 0 ? warmPools.find((pool) => !watchNamespaces.includes(pool.namespace)) : undefined;
  if (unwatched) {
    throw new ConfigError(
      `config key warmPools: pool ${unwatched.name} is in namespace ${unwatched.namespace}, which watchNamespaces does not list; add it there or move the pool`,
    );
  }
  return result.data;
}
