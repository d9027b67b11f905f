// Type declarations of redis-ratelimit (clients/node). Every method sends one module command.

/// <reference types="node" />

/** Milliseconds, or a string with a unit: "1500ms", "2s", "1m", "24h", "1d". */
export type Duration = number | string;

/** Anything the package can send commands through. */
export type RedisLike =
  | { call(...args: any[]): Promise<unknown>; sendCommand(...args: any[]): unknown } // ioredis Redis / Cluster
  | { sendCommand(...args: any[]): Promise<unknown> } // node-redis client / cluster
  | ((...args: string[]) => Promise<unknown>); // a sendCommand function

/** The reply of every limiting command. */
export interface Decision {
  /** true if the request is admitted */
  allowed: boolean;
  /** the configured maximum (capacity / limit) */
  limit: number;
  /** whole permits left after this request */
  remaining: number;
  /** refused: ms until the same request would be admitted (-1: never, cost > limit); admitted: 0 (leaky delay mode: the delay to wait) */
  retryAfterMs: number;
  /** ms until the limiter is back to its initial state */
  resetAfterMs: number;
}

export interface CallOptions {
  /** permits this request takes (default 1; 0 peeks) */
  cost?: number;
  /** refused by the algorithm: locked out for this long (the module's penalty box) */
  ban?: Duration;
  /** with `ban`: the refusal that starts the ban also clears the limiter, which is fresh when the ban ends (BAN d CLEAR) */
  clear?: boolean;
  /** wait in the server's FIFO queue up to this long until admitted (0: without limit). Blocks the connection. */
  wait?: Duration;
  /** judge, reply, change nothing */
  dryRun?: boolean;
  /** evaluate at this unix ms instead of the server clock */
  at?: number;
  /** judge against a fresh limiter: the key then holds exactly this request (COST 0: deleted) */
  fresh?: boolean;
  /**
   * unix ms (this machine's clock) after which the caller no longer waits: a call the server
   * runs later counts nothing and is refused with a DEADLINE error (`code` 'DEADLINE')
   */
  deadline?: number;
}

export interface TokenOptions extends CallOptions {
  capacity: number;
  rate: number;
  period: Duration;
  /** add `rate` tokens at once every period instead of continuously */
  step?: boolean;
}

export interface PeriodOptions extends CallOptions {
  limit: number;
  period: Duration;
  /** windows on calendar boundaries: true (UTC) or a UTC offset ("8h", "-5h", ms) */
  align?: boolean | Duration;
  /** `period` starts a new window only: a window in force keeps its own (KEEPPERIOD; not with align) */
  keepPeriod?: boolean;
}

export interface SlideOptions extends CallOptions {
  limit: number;
  window: Duration;
  /** b counters instead of the exact log */
  buckets?: number;
}

export interface LeakyOptions extends CallOptions {
  capacity: number;
  rate: number;
  period: Duration;
  /** meter form: admitted requests proceed at once */
  nodelay?: boolean;
  /** water ahead tolerated without delay */
  delay?: number;
}

export interface ThrottleOptions {
  maxBurst: number;
  count: number;
  /** whole seconds */
  period: Duration;
  quantity?: number;
  dryRun?: boolean;
  at?: number;
  /** unix ms after which the call counts nothing (DEADLINE) */
  deadline?: number;
}

export type Algorithm = 'token' | 'period' | 'slide' | 'leaky';

export type LimitSpec =
  | ({ algorithm: 'token' } & TokenOptions)
  | ({ algorithm: 'period' } & PeriodOptions)
  | ({ algorithm: 'slide' } & SlideOptions)
  | ({ algorithm: 'leaky' } & LeakyOptions);

export type AllLimit = { key: string | Buffer } & (
  | ({ algorithm: 'token' } & Omit<TokenOptions, 'ban' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  | ({ algorithm: 'period' } & Omit<PeriodOptions, 'ban' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  | ({ algorithm: 'slide' } & Omit<SlideOptions, 'ban' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  | ({ algorithm: 'leaky' } & Omit<LeakyOptions, 'ban' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  /** a server policy's limit (RL.ALL … POLICY name [COST n]) */
  | { policy: string; cost?: number; algorithm?: never }
);

type BlockFree = 'cost' | 'wait' | 'dryRun' | 'at' | 'fresh' | 'ban' | 'clear';

/** The limits a permit block can carry (not a sliding window, nor a leaky bucket in delay mode). */
export type BlockLimit =
  | ({ algorithm: 'token' } & Omit<TokenOptions, BlockFree>)
  | ({ algorithm: 'period' } & Omit<PeriodOptions, BlockFree>)
  | ({ algorithm: 'leaky' } & Omit<LeakyOptions, BlockFree | 'delay'> & { nodelay: true })
  | ({ algorithm: 'throttle' } & Omit<ThrottleOptions, 'quantity' | 'dryRun' | 'at'>);

export interface PermitBlockOptions {
  /** permits per grant (one module call with COST size) */
  size: number;
  /** a block's longest life (default 1 s); a fixed window's block also ends with its window */
  lifetime?: Duration;
  /** start the next grant in the background at this many held permits or fewer (default 0: when empty) */
  refillBelow?: number;
  /** a fixed window's unused permits are refunded only this long before its end, else dropped (default 100 ms) */
  refundGuard?: Duration;
}

/** Permits taken from the server `size` at a time and handed out locally (docs/clients.md "Permit blocks"). */
export class PermitBlock {
  constructor(rateLimit: RateLimit, key: string | Buffer, limit: BlockLimit, options: PermitBlockOptions);
  /** one decision; `remaining` is the permits this instance still holds */
  take(): Promise<Decision>;
  /** stops handing out permits and refunds the unused ones */
  close(): Promise<void>;
  /** permits held now */
  readonly held: number;
  readonly stats: { calls: number; refunds: number; grants: number; granted: number; used: number; refunded: number; dropped: number };
  /** called with a refund's error (refunds run on timers) */
  onError?: (error: unknown) => void;
}

export interface AllDecision extends Decision {
  /** 0-based index of the binding limit */
  index: number;
  /** one decision per limit, in order */
  details: Decision[];
}

export interface AcquireOptions {
  limit: number;
  lease: Duration;
  id?: string | Buffer;
  wait?: Duration;
  dryRun?: boolean;
  at?: number;
  /** unix ms after which the call counts nothing (DEADLINE) */
  deadline?: number;
}

export interface Lease extends Decision {
  /** the lease id (null when refused or under dryRun) */
  id: string | null;
}

/** Fields every RL.INFO reply has (the server's snake_case names in camelCase). */
interface InfoCommon {
  /** unix ms of the last change: an admitted call, a refund, the start of a ban */
  updatedMs: number;
  /** ms until the key expires (-1: no expiry) */
  ttlMs: number;
  /** the instant the fields after ttlMs are computed at: max(server clock, updatedMs) */
  nowMs: number;
  /** when the ban ends (only while a ban is stored) */
  bannedUntilMs?: number;
}

export interface TokenInfo extends InfoCommon {
  algorithm: 'token';
  capacity: number;
  rate: number;
  periodMs: number;
  /** 1 for STEP refill, 0 for smooth */
  step: number;
  /** whole tokens at updatedMs */
  tokens: number;
  /** the part of a token beyond the whole count, in 1/periodMs units */
  fraction: number;
  /** STEP: the refill grid origin */
  originMs?: number;
}

export interface PeriodInfo extends InfoCommon {
  algorithm: 'period';
  limit: number;
  periodMs: number;
  /** 1 when ALIGN is in force */
  align: number;
  utcOffsetMs?: number;
  /** units admitted in the window in force */
  used: number;
  windowStartMs: number;
  windowEndMs: number;
}

export interface SlideInfo extends InfoCommon {
  algorithm: 'slide';
  limit: number;
  windowMs: number;
  /** 0: the exact log */
  buckets: number;
  anchor: number;
  floor: number;
  originMs?: number;
  used: number;
  entries: number;
  /** permits counted in the window at nowMs */
  windowUsed: number;
  windowOldestMs: number;
  /** BUCKETS: the b + 1 sub-window counters at nowMs, oldest first */
  windowCounts?: number[];
  /** BUCKETS: the start of the oldest of those sub-windows */
  windowStartMs?: number;
}

export interface LeakyInfo extends InfoCommon {
  algorithm: 'leaky';
  capacity: number;
  rate: number;
  periodMs: number;
  nodelay: number;
  delay: number;
  /** whole units of water at updatedMs */
  level: number;
  fraction: number;
}

export interface GcraInfo extends InfoCommon {
  algorithm: 'gcra';
  maxBurst: number;
  count: number;
  periodMs: number;
  tatMs: number;
  tatFrac: number;
}

export interface LeaseInfo extends InfoCommon {
  algorithm: 'lease';
  limit: number;
  leaseMs: number;
  held: number;
  leases: Array<{ id: string; expiresMs: number }>;
}

/** RL.INFO as an object: narrow on `algorithm` for the fields of each kind. */
export type LimiterInfo = TokenInfo | PeriodInfo | SlideInfo | LeakyInfo | GcraInfo | LeaseInfo;

/**
 * A server error as the client library raises it (ioredis ReplyError, node-redis ErrorReply),
 * with `code`: the first word of its text (`ERR`, `WRONGTYPE`, …).
 */
export interface RedisServerError extends Error {
  code: string;
}

export class RateLimit {
  constructor(client: RedisLike, opts?: { prefix?: string });
  token(key: string | Buffer, opts: TokenOptions): Promise<Decision>;
  period(key: string | Buffer, opts: PeriodOptions): Promise<Decision>;
  slide(key: string | Buffer, opts: SlideOptions): Promise<Decision>;
  leaky(key: string | Buffer, opts: LeakyOptions): Promise<Decision>;
  limit(key: string | Buffer, opts: LimitSpec): Promise<Decision>;
  throttle(key: string | Buffer, opts: ThrottleOptions): Promise<Decision>;
  all(limits: AllLimit[], opts?: { dryRun?: boolean; at?: number; deadline?: number }): Promise<AllDecision>;
  refund(key: string | Buffer, count: number, opts?: { at?: number }): Promise<Decision | null>;
  /** RL.CHARGE: takes `count` permits past the limit (a debt); not sliding windows; null when nothing live */
  charge(key: string | Buffer, count: number, opts?: { at?: number }): Promise<Decision | null>;
  acquire(key: string | Buffer, opts: AcquireOptions): Promise<Lease>;
  release(key: string | Buffer, id: string | Buffer, opts?: { at?: number }): Promise<boolean>;
  peek(key: string | Buffer): Promise<Decision | null>;
  info(key: string | Buffer): Promise<LimiterInfo | null>;

  /** RL.HIT: judges `key` under the server's policy (or the key's override). */
  hit(policy: string, key: string | Buffer, opts?: HitOptions): Promise<Decision>;
  /** RL.POLICY SET, on every primary of a cluster client. */
  setPolicy(name: string, limit: PolicyLimit, opts?: PolicyOptions): Promise<void>;
  /** RL.POLICY GET: the definition, or null. */
  getPolicy(name: string, opts?: { for?: string | Buffer }): Promise<PolicyDefinition | null>;
  /** RL.POLICY DEL (the policy and its overrides, or one override), on every primary. */
  deletePolicy(name: string, opts?: { for?: string | Buffer }): Promise<boolean>;
  /** RL.POLICY LIST (every primary's, each name once), sorted. */
  policies(): Promise<string[]>;
  /** RL.POLICY STATS (summed over the primaries of a cluster client). */
  policyStats(name: string): Promise<PolicyStats>;
  /** RL.POLICY RESETSTAT, on every primary. */
  resetPolicyStats(): Promise<void>;
}

export interface HitOptions {
  cost?: number;
  wait?: Duration;
  dryRun?: boolean;
  at?: number;
  /** unix ms after which the call counts nothing (DEADLINE) */
  deadline?: number;
}

/** A policy's limit: RL.ALL's grammar as an object (no cost: that is per call). */
export type PolicyLimit =
  | ({ algorithm: 'token' } & Omit<TokenOptions, keyof CallOptions>)
  | ({ algorithm: 'period' } & Omit<PeriodOptions, keyof CallOptions>)
  | ({ algorithm: 'slide' } & Omit<SlideOptions, keyof CallOptions>)
  | ({ algorithm: 'leaky' } & Omit<LeakyOptions, keyof CallOptions>);

export interface PolicyOptions {
  /** an override of the policy for this one key */
  for?: string | Buffer;
  /** refused requests lock the key out this long */
  ban?: Duration;
  /** with `ban`: the refusal that starts the ban also clears the limiter (BAN d CLEAR) */
  clear?: boolean;
  /** judge and count, but admit everything (a new limit tried live) */
  shadow?: boolean;
}

/** RL.POLICY GET in camelCase: the algorithm, its parameters under RL.INFO's names, banMs and shadow. */
export type PolicyDefinition = {
  algorithm: Algorithm;
  /** 0 when the policy has no BAN */
  banMs: number;
  /** 1 in shadow mode */
  shadow: number;
  /** 1 when the ban clears the limiter (BAN d CLEAR) */
  clear?: number;
} & Partial<Record<'capacity' | 'rate' | 'periodMs' | 'step' | 'limit' | 'align' | 'utcOffsetMs' | 'keepperiod' | 'windowMs' | 'buckets' | 'anchor' | 'floor' | 'nodelay' | 'delay', number>>;

/** RL.POLICY STATS in camelCase. */
export type PolicyStats = {
  calls: number;
  admitted: number;
  limited: number;
  /** refused by the policy, admitted because it is in shadow mode */
  shadowLimited: number;
  /** admitted with at most 20 % of the limit left */
  nearLimit: number;
} & Record<string, number | string>;

/** The server does not know the module's commands: the message says how to load the module. */
export class ModuleNotLoadedError extends Error {
  code: 'ERR';
  command: string;
  cause: Error;
}

/** The middleware's `timeout` passed without a reply from Redis. */
export class RateLimitTimeoutError extends Error {
  code: 'ETIMEDOUT';
  command: string;
  timeoutMs: number;
}

/** A call that may have counted lost its connection before the reply: it is not sent again (ioredis would re-send it). */
export class CallMayHaveCountedError extends Error {
  code: 'ECONNRESET';
  command: string;
}

/** The Redis Cluster slot of a key (hash tags honoured). */
export function keySlot(key: string | Buffer): number;

/** Options of registerRateLimitMetrics. */
export interface RateLimitMetricsOptions {
  /** Expose the n most refused keys (RL.TOP) as ratelimit_top_key_refused{key}: 0 … 100 (default 0, off). */
  topKeys?: number;
  /**
   * How long a scrape waits for the servers (ms or a duration such as "2s"; default 5 s): past
   * it the scrape answers ratelimit_up 0 with the middleware's counters.
   */
  timeout?: Duration;
}

/**
 * Registers Prometheus metrics (prom-client, an optional peer) in `registry`: the module's
 * counters read at scrape time (ratelimit_decisions_total{command, outcome}, per policy,
 * waiting, RL.TOP) in one round trip per node, and this process's middleware decisions.
 * docs/observability.md lists them. Returns the prom-client metrics registered.
 */
export function registerRateLimitMetrics(registry: object, client: RedisLike, options?: RateLimitMetricsOptions): object[];

// ---- Express / Connect middleware -------------------------------------------------------------

interface RequestLike {
  ip?: string;
  socket?: { remoteAddress?: string };
  [k: string]: any;
}
interface ResponseLike {
  statusCode: number;
  setHeader(name: string, value: string | number): unknown;
  end(body?: any): unknown;
}
type Next = (err?: any) => void;

type MiddlewareLimit =
  /** the server's policy `policy` is the limit (RL.HIT): no limit of the middleware's own */
  | { policy: string; algorithm?: never; capacity?: never; rate?: never; period?: never; limit?: never; window?: never; ban?: never }
  | ({ algorithm?: 'token' } & Omit<TokenOptions, 'cost' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  | ({ algorithm: 'period' } & Omit<PeriodOptions, 'cost' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  | ({ algorithm: 'slide' } & Omit<SlideOptions, 'cost' | 'wait' | 'dryRun' | 'at' | 'fresh'>)
  | ({ algorithm: 'leaky' } & Omit<LeakyOptions, 'cost' | 'wait' | 'dryRun' | 'at' | 'fresh'>);

export type RateLimitMiddlewareOptions<Req extends RequestLike = RequestLike, Res extends ResponseLike = ResponseLike> = MiddlewareLimit & {
  client: RedisLike | RateLimit;
  /** the limiter key of a request (default: its address); undefined, null or "" falls back to the address */
  key?: (req: Req) => string | number | undefined | null | Promise<string | number | undefined | null>;
  /** the permits a request takes (default 1) */
  cost?: (req: Req) => number | Promise<number>;
  /**
   * the namespace of this middleware's keys (default on a server policy: "ratelimit:", the key
   * every package writes for a tenant; with a limit of its own: "rl:<algorithm>:<id>:", id
   * derived from the limit's parameters, so middlewares with different limits never share counters)
   */
  prefix?: string;
  /** group IPv6 client addresses by this prefix length in the default key (default 56; false: the full address) */
  ipv6Subnet?: number | false;
  /** answer (fail open or next(err)) when Redis has not replied within this long (default 500 ms; 0: no timeout) */
  timeout?: Duration;
  /** policy name in the RateLimit headers (default "default"); alone (no limit given), the server's policy of that name */
  policy?: string;
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** replaces the default 429 JSON reply */
  handler?: (req: Req, res: Res, next: Next, decision: Decision) => void;
  /** let requests through when Redis fails or times out (default: next(err)) */
  failOpen?: boolean;
};

declare global {
  namespace Express {
    interface Request {
      /** the decision of redis-ratelimit's rateLimit() middleware for this request */
      rateLimit?: Decision;
    }
  }
}

export function rateLimit<Req extends RequestLike = any, Res extends ResponseLike = any>(
  options: RateLimitMiddlewareOptions<Req, Res>,
): (req: Req, res: Res, next: Next) => Promise<void>;

// ---- rate-limiter-flexible ------------------------------------------------------------------

export interface RateLimiterResLike {
  msBeforeNext: number;
  remainingPoints: number;
  consumedPoints: number;
  isFirstInDuration: boolean;
}

export interface RateLimiterRedisModuleOptions {
  storeClient: any;
  points?: number;
  duration?: number;
  keyPrefix?: string;
  blockDuration?: number;
  execEvenly?: boolean;
  execEvenlyMinDelayMs?: number;
  inMemoryBlockOnConsumed?: number;
  inMemoryBlockDuration?: number;
  insuranceLimiter?: any;
  useRedisPackage?: boolean;
  rejectIfRedisNotReady?: boolean;
  /**
   * The module's counter lives at `<keyPrefix>:rl:<key>`, beside the stock string counter: when
   * a window starts, what the stock RateLimiterRedis counted there is carried over once (GET).
   * Default true; false once no stock key can be left.
   */
  migrateFromStock?: boolean;
  [option: string]: any;
}

/** rate-limiter-flexible's RateLimiterRedis contract on the module (extends the library's RateLimiterStoreAbstract). */
export class RateLimiterRedisModule {
  constructor(options: RateLimiterRedisModuleOptions);
  points: number;
  duration: number;
  keyPrefix: string;
  blockDuration: number;
  getKey(key: string | number): string;
  consume(key: string | number, points?: number, options?: { customDuration?: number; [k: string]: any }): Promise<RateLimiterResLike>;
  penalty(key: string | number, points?: number, options?: object): Promise<RateLimiterResLike>;
  reward(key: string | number, points?: number, options?: object): Promise<RateLimiterResLike>;
  block(key: string | number, secDuration: number, options?: object): Promise<RateLimiterResLike>;
  get(key: string | number, options?: object): Promise<RateLimiterResLike | null>;
  set(key: string | number, points: number, secDuration?: number, options?: object): Promise<RateLimiterResLike>;
  delete(key: string | number, options?: object): Promise<boolean>;
}

/** Several limiters, all or nothing, in one RL.ALL. */
export class RateLimiterUnionModule {
  constructor(...limiters: RateLimiterRedisModule[]);
  consume(key: string | number, points?: number): Promise<Record<string, RateLimiterResLike>>;
}

/** Requests wait for tokens in the server's FIFO queue (WAIT). */
export class RateLimiterQueueModule {
  constructor(limiter: RateLimiterRedisModule, options?: { maxQueueSize?: number; timeoutMs?: Duration; client?: any });
  removeTokens(tokens?: number, key?: string): Promise<number>;
  getTokensRemaining(key?: string): Promise<number>;
  close(): Promise<void>;
}

// ---- @nestjs/throttler ----------------------------------------------------------------------

export interface ThrottlerStorageRecord {
  totalHits: number;
  timeToExpire: number;
  isBlocked: boolean;
  timeToBlockExpire: number;
}

/** @nestjs/throttler ThrottlerStorage on the module: one RL.PERIOD … BAN blockDuration CLEAR per hit. */
export class ThrottlerStorageRedisModule {
  constructor(client: any, options?: { prefix?: string });
  increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerStorageRecord>;
  onModuleDestroy(): void;
}
export { ThrottlerStorageRedisModule as ThrottlerStorageRedisService };

// ---- express-rate-limit ---------------------------------------------------------------------

export interface RedisModuleStoreOptions {
  /** rate-limit-redis' option: send one command, e.g. (...args) => client.sendCommand(args) */
  sendCommand?: (...args: string[]) => Promise<unknown>;
  /** or a client (ioredis / node-redis, cluster included) */
  client?: any;
  /** key prefix (default "rl:"); the module's count for `key` is `<prefix>rl:<key>`, beside rate-limit-redis' `<prefix><key>` */
  prefix?: string;
  /** carry rate-limit-redis' count at `<prefix><key>` over once when a window starts (default true) */
  migrateFromStock?: boolean;
}

export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

/** An express-rate-limit Store on the module. */
export class RedisModuleStore {
  constructor(options: RedisModuleStoreOptions);
  prefix: string;
  localKeys: false;
  init(options: { windowMs: number }): void;
  increment(key: string): Promise<ClientRateLimitInfo>;
  decrement(key: string): Promise<void>;
  get(key: string): Promise<ClientRateLimitInfo | undefined>;
  resetKey(key: string): Promise<void>;
}
