/** Schema pieces shared by every resource: identifiers, descriptions, environment names. */
import * as v from 'valibot'
import { formatTimestamp } from '../../store/clock'

// The same rule as the `i`-flagged UUID of http/access.ts, spelled without flags for JSON Schema.
const UUID_ANY_CASE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

/** A UUID in a body or query; answered lowercase whatever case it was sent in. */
export const Uuid = v.pipe(v.string(), v.regex(UUID_ANY_CASE, 'Invalid UUID'), v.toLowerCase())

export const MAX_DESCRIPTION = 1024

/**
 * Characters that show nothing: whitespace, controls, format characters (U+200B, the bidi marks),
 * other default-ignorable code points, and lone surrogates. A description needs one that is not.
 */
const INVISIBLE = /^[\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{Cs}]*$/u

/** Not empty (nor only invisible characters), at most 1024 characters (code points). */
export const Description = v.pipe(
  v.string(),
  // JSON Schema counts characters as code points, like the check below.
  v.metadata({ minLength: 1, maxLength: MAX_DESCRIPTION }),
  v.check((s) => !INVISIBLE.test(s), 'Must not be empty or only invisible characters'),
  v.check((s) => s.length <= MAX_DESCRIPTION || [...s].length <= MAX_DESCRIPTION, `Must be at most ${MAX_DESCRIPTION} characters`),
)

// Checked before uppercasing: `ß` uppercases to `SS`, which would pass.
const ENVIRONMENT_NAME = /^[A-Za-z0-9_-]{1,32}$/

/** Case-insensitive on input, stored and shown in uppercase. */
export const EnvironmentName = v.pipe(
  v.string(),
  v.regex(ENVIRONMENT_NAME, 'Environment names are 1 to 32 letters, digits, "_" or "-"'),
  v.toUpperCase(),
)

/**
 * `"dev, Prod,DEV"` → `['DEV', 'PROD']`: each name as `EnvironmentName` takes it (spaces around the
 * commas allowed), uppercase, sorted, without duplicates, never empty.
 */
export const EnvironmentList = v.pipe(
  v.union([v.string(), v.array(v.string())], 'Expected a comma-separated string or an array of strings'),
  v.transform((input) => (typeof input === 'string' ? input.split(',') : input).map((name) => name.replace(/^[ \t]+|[ \t]+$/g, ''))),
  v.check((names) => names.length > 0 && names.every((n) => ENVIRONMENT_NAME.test(n)), 'Environment names are 1 to 32 letters, digits, "_" or "-", separated by commas'),
  v.transform((names) => [...new Set(names.map((n) => n.toUpperCase()))].sort()),
)

export const formatEnvironments = (names: readonly string[]) => names.join(',')

export const timestamps = (r: { created: number; modified: number }) => ({
  created: formatTimestamp(r.created),
  modified: formatTimestamp(r.modified),
})

/** More different values than any honest filter has (docs/security.md). */
export const MAX_FILTER_VALUES = 100
/** Values of one filter as sent, duplicates and blanks included: splitting stops one past this. */
export const MAX_FILTER_VALUES_SENT = 1_000

const distinct = (values: readonly string[]) => [...new Set(values)]

/**
 * A multi-value query filter: repeated (`?ids=a&ids=b`) and comma-separated (`?ids=a,b`) alike;
 * blank values are ignored, so an empty list means no filter. A value sent twice counts once, so
 * the services never do the same work twice. Over MAX_FILTER_VALUES_SENT values, or over
 * MAX_FILTER_VALUES different ones, is a 400, told before any value is checked.
 */
const multiValue = <S extends v.GenericSchema<string, string>>(item: S) =>
  v.optional(
    v.pipe(
      v.union([v.string(), v.array(v.string())]),
      v.transform((raw): string[] => (Array.isArray(raw) ? raw : [raw]).flatMap((s) => s.split(',', MAX_FILTER_VALUES_SENT + 1))),
      // Checks, not maxLength: JSON Schema would read that as a string's length (/openapi.json).
      v.check((values) => values.length <= MAX_FILTER_VALUES_SENT, `At most ${MAX_FILTER_VALUES_SENT} values`),
      v.transform((values) => distinct(values.map((s) => s.trim()).filter((s) => s.length > 0))),
      v.check((values) => values.length <= MAX_FILTER_VALUES, `At most ${MAX_FILTER_VALUES} different values`),
      v.array(item),
      // Again after the item's normalisation: `A` and `a` name the same id.
      v.transform((values: string[]) => distinct(values)),
    ),
  )

export const UuidList = multiValue(Uuid)

const positiveInteger = (max: number, name: string) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, `${name} must be a whole number`),
    v.transform(Number),
    v.minValue(1, `${name} must be at least 1`),
    v.maxValue(max, `${name} must be at most ${max}`),
  )

export const MAX_PAGE_SIZE = 1000

/**
 * page, page_size and order, shared by every paged list. Any page a client can count to is served
 * (past the end: an empty page); the bound only keeps it an exact number.
 */
export const pagingQuery = {
  page: v.optional(positiveInteger(Number.MAX_SAFE_INTEGER, 'page')),
  page_size: v.optional(positiveInteger(MAX_PAGE_SIZE, 'page_size'), '100'),
  order: v.optional(v.picklist(['asc', 'desc'], 'order must be asc or desc'), 'asc'),
}
