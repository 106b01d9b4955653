/**
 * The `poise` block as grpc-js holds it (its `TypedLoadBalancingConfig`):
 * parsed once per service config, carrying either the validated options
 * (config.ts) or the `PoiseError` that fails the channel.
 * @internal
 */
import type { experimental } from '@grpc/grpc-js';
import { PoiseError } from '../core/errors.js';
import { type ResolvedLbConfig, resolveLbConfig } from './config.js';
import { POISE } from './resolver.js';

/** A parsed `poise` block, or the error that stops the channel. @internal */
export class PoiseLoadBalancingConfig implements experimental.TypedLoadBalancingConfig {
  readonly config: ResolvedLbConfig | undefined;
  readonly problem: PoiseError | undefined;
  private readonly raw: unknown;

  constructor(raw: unknown) {
    this.raw = raw;
    let config: ResolvedLbConfig | undefined;
    let problem: PoiseError | undefined;
    try {
      config = resolveLbConfig(raw);
    } catch (err) {
      if (!(err instanceof PoiseError)) throw err;
      problem = err;
    }
    this.config = config;
    this.problem = problem;
  }

  getLoadBalancerName(): string {
    return POISE;
  }

  toJsonObject(): object {
    return { [POISE]: this.raw ?? {} };
  }

  /** Never throws: grpc-js would skip a block that throws and fall back to pick_first silently. */
  static createFromJson(obj: unknown): PoiseLoadBalancingConfig {
    return new PoiseLoadBalancingConfig(obj);
  }
}
