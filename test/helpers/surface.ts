// The public run-time surface of each package entry, shared by the entry
// test (imports through the exports map, in this repo) and the pack test
// (imports from the installed tarball).

/** The run-time names of each entry, exactly: a name added or leaked shows up here. */
export const SURFACE: Record<string, string[]> = {
  'poise-lb': [
    'Backend', 'DEFAULT_HASH_SEED', 'FlowController', 'LeastLoaded', 'LocalityWeightedRandom', 'Localized',
    'MAGLEV_DEFAULT_TABLE_SIZE', 'MAX_PRIORITY', 'MAX_WEIGHT', 'Maglev', 'PeakEwma', 'PoiseError', 'PowerOfTwo',
    'PreparedLocalityWeightedRandom', 'PreparedPriorityWeightedRandom', 'Prioritized', 'PriorityWeightedRandom',
    'RING_HASH_DEFAULT_MIN_SIZE', 'RING_HASH_MAX_SIZE', 'Random', 'Rendezvous', 'RingHash', 'Rng', 'RoundRobin', 'SmoothWeightedRoundRobin', 'WeightedRandom', 'decayEstimate',
    'holdbackCeilings', 'isPoiseError', 'isStatus', 'isValidWeight', 'observeSample', 'validateWeight',
  ],
  'poise-lb/runtime': [
    'AdmissionGate', 'Balancer', 'DEFAULT_MAX_DOCUMENT_BYTES', 'EwmaSeries', 'HealthFlag', 'KEYED_POLICY_NAMES', 'LOG_LEVELS', 'Lease', 'LeaseKind',
    'LoadTable',
    'POLICY_NAMES', 'Router', 'SlotState', 'StaticMembership', 'bindMembership', 'createLogger', 'createWorkerPool',
    'ejectionTimeMs', 'findOutliers', 'parseDocument', 'poolWorkerData', 'resolveDocument', 'workerRouter',
  ],
  'poise-lb/redis': ['MembershipPublisher', 'RedisMembership'],
  'poise-lb/net': [
    'CidrBands', 'DURATION_BUCKETS_SECONDS', 'LOCAL_ERROR_CODES', 'ProxyCounter', 'ProxyCounters', 'REFUSAL_REASONS', 'RoutedSocket', 'TERMINATIONS',
    'TcpProxy', 'connect', 'encodeProxyV1', 'encodeProxyV2', 'fixedBand', 'isLocalError', 'parseProxyHeader', 'reusePortSupported', 'routedStream',
  ],
  'poise-lb/metrics': ['BACKEND_STATES', 'MetricsServer', 'collectMetrics', 'parseMetricsText'],
  'poise-lb/cli': [
    'EXIT', 'EXIT_HELP', 'NAME_RULE', 'UsageError', 'choiceFlag', 'durationFlag', 'exitCodeOf', 'integerFlag', 'nameFlag', 'parseFlags',
    'pathFlag', 'redisUrlFlag', 'secondsFlag',
  ],
};

/** Internals that used to leak from the root; none may come back through any entry. */
export const INTERNALS = ['murmur3Key', 'md5Word', 'md5Hex', 'Successors', 'checkedAdd', 'checkedSum', 'mulDivFloor', 'MILLION', 'hash32', 'hash53', 'hash64', 'backoffMs', 'sharedClock', 'membershipKeys', 'resolveEjection', 'rateLimited', 'LAYOUT_VERSION'];
