/** Preloaded by bunfig.toml for every `bun test`: once all test files have run, their temporary dirs go. */
import { afterAll } from 'bun:test'
import { removeTempDirs } from './temp-dirs'

afterAll(removeTempDirs)
