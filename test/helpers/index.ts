/**
 * The test kit moved to core/testing (the `mamkit/testing` entry): import it from there. This file
 * re-exports it so tests written against test/helpers keep compiling.
 */
export * from '../../core/testing/index.js'
