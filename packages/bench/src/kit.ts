/**
 * What the bench takes from poise-lb beyond its public entries (the CLI's flag
 * parser, usage error and exit-code table, the policy names, the seedable
 * generator): poise-lb's src/bench-kit.ts, reached by a relative path into the
 * root package's build — none of it is poise-lb's semver API, so this package
 * runs from the repository's workspace (npm install links it), where the path
 * holds from src/ and from dist/ alike (rootDir src, outDir dist). A unit run
 * maps the path to the source (vitest.config.ts).
 */
// Every name: src/bench-kit.ts is itself the explicit list of what the bench may take.
export * from '../../../dist/src/bench-kit.js';
