/**
 * Schema pieces shared by every resource: identifiers, descriptions, environment names, paging; and
 * the pieces of the answers, from which each model.ts builds the response schemas of its views
 * (GET /openapi.json shows them; docs/api.md describes them).
 */
import * as v from 'valibot'
import { formatTimestamp } from '../../store/clock'
import { UUID_ANY_CASE, UUID_LOWERCASE } from '../../storage/records'

/**
 * How a schema appears in the OpenAPI document when converting it would not say what it accepts:
 * query values arrive as text but stand for integers or lists (see `openApiDocument`). Put it just
 * before the pipe's first transformation, where the document's conversion stops.
 */
export const OPENAPI_FORM = 'x-openapi-form'
export const documentedAs = <T>(jsonSchema: Record<string, unknown>) => v.metadata<T, Record<string, unknown>>({ [OPENAPI_FORM]: jsonSchema })

/** A UUID in a body or query; answered lowercase whatever case it was sent in. */
export const Uuid = v.pipe(v.string(), v.regex(UUID_ANY_CASE, 'Invalid UUID'), v.toLowerCase())

export const MAX_DESCRIPTION = 1024

/**
 * Characters that show nothing: whitespace, controls, format characters (U+200B, the bidi marks),
 * other default-ignorable code points, and lone surrogates. A description needs one that is not.
 */
const INVISIBLE = /^[\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{Cs}]*$/u

/**
 * Text both stores keep exactly: no U+0000 (PostgreSQL's text cannot hold it) and no lone surrogate
 * (not Unicode: it has no UTF-8, and JSON tools refuse it). docs/api.md, "Conventions".
 */
const isStorableText = (s: string) => s.isWellFormed() && !s.includes('\u0000')
const STORABLE_TEXT_MESSAGE = 'Must not hold U+0000 or a lone surrogate'

/**
 * A query parameter that takes one value (a multi-value filter is `multiValue`): sent twice it
 * arrives as an array, refused in words rather than as the validator's type names.
 */
export const oneQueryValue = (name: string) => v.string(`${name} must be given once`)

/** Text searched for in stored text (a description): what could never be stored matches nothing, so it is refused. */
export const SearchText = (name: string) => v.pipe(oneQueryValue(name), v.check(isStorableText, STORABLE_TEXT_MESSAGE))

/** Not empty (nor only invisible characters), at most 1024 characters (code points). */
export const Description = v.pipe(
  v.string(),
  // JSON Schema counts characters as code points, like the check below; `\S` (anywhere) is an
  // approximation of "not only invisible characters" that JSON Schema can express.
  v.metadata({
    minLength: 1,
    maxLength: MAX_DESCRIPTION,
    pattern: '\\S',
    description: 'At least one visible character (not only blanks, control or format characters such as U+200B); no U+0000 and no lone surrogate.',
  }),
  v.check((s) => !INVISIBLE.test(s), 'Must not be empty or only invisible characters'),
  v.check(isStorableText, STORABLE_TEXT_MESSAGE),
  v.check((s) => s.length <= MAX_DESCRIPTION || [...s].length <= MAX_DESCRIPTION, `Must be at most ${MAX_DESCRIPTION} characters`),
)

/**
 * docs/api.md "Conventions": a name is matched after uppercasing, so whatever uppercases to a valid name is
 * one (`ß` is `SS`, `ſ` is `S`). The documented pattern is the plain ASCII form clients send.
 */
const ENVIRONMENT_NAME = /^[A-Z0-9_-]{1,32}$/
const ENVIRONMENT_NAME_MESSAGE = 'Environment names are 1 to 32 letters, digits, "_" or "-" (after uppercasing)'
const isEnvironmentName = (name: string) => ENVIRONMENT_NAME.test(name.toUpperCase())

/**
 * A customer's environments at most (docs/security.md): each change of the list records it whole,
 * before and after, in its audit event, so an unbounded list made every change costlier than the last.
 */
export const MAX_ENVIRONMENTS = 100

/** An environment name as the document shows it: the plain ASCII form clients send. */
const NAME_TEXT = '[A-Za-z0-9_-]{1,32}'
export const ENVIRONMENT_NAME_FORM = { type: 'string', pattern: `^${NAME_TEXT}$`, description: 'An environment name, any case (stored uppercase).' }

/** Case-insensitive on input, stored and shown in uppercase. */
export const EnvironmentName = v.pipe(
  v.string(),
  documentedAs(ENVIRONMENT_NAME_FORM),
  v.check(isEnvironmentName, ENVIRONMENT_NAME_MESSAGE),
  v.toUpperCase(),
)

/**
 * `"dev, Prod,DEV"` → `['DEV', 'PROD']`: each name as `EnvironmentName` takes it (spaces around the
 * commas allowed), uppercase, sorted, without duplicates, never empty.
 */
export const EnvironmentList = v.pipe(
  v.union([v.string(), v.array(v.string())], 'Expected a comma-separated string or an array of strings'),
  documentedAs({
    anyOf: [
      // Spaces and tabs around a name, as the transform below trims (no other whitespace).
      { type: 'string', pattern: `^[ \\t]*${NAME_TEXT}[ \\t]*(,[ \\t]*${NAME_TEXT}[ \\t]*)*$`, examples: ['prod,test'] },
      { type: 'array', minItems: 1, items: { type: 'string', pattern: `^[ \\t]*${NAME_TEXT}[ \\t]*$` } },
    ],
    description: `Environment names (letters, digits, "_" or "-"; any case), comma-separated or as an array: at most ${MAX_ENVIRONMENTS} different ones once uppercased.`,
  }),
  v.transform((input) => (typeof input === 'string' ? input.split(',') : input).map((name) => name.replace(/^[ \t]+|[ \t]+$/g, ''))),
  v.check((names) => names.length > 0 && names.every(isEnvironmentName), `${ENVIRONMENT_NAME_MESSAGE}, separated by commas`),
  v.transform((names) => [...new Set(names.map((n) => n.toUpperCase()))].sort()),
  v.check((names) => names.length <= MAX_ENVIRONMENTS, `At most ${MAX_ENVIRONMENTS} environments`),
)

export const formatEnvironments = (names: readonly string[]) => names.join(',')

declare const viewOf: unique symbol
/** A record's view as JSON text, typed with the view it holds (for the answer's type). */
export type ViewText<V> = string & { readonly [viewOf]?: V }

/** `view` as JSON text, made anew each time: for records read once (decoded audit events). */
export const viewText =
  <R, V>(view: (record: R) => V) =>
  (record: R): ViewText<V> =>
    JSON.stringify(view(record)) as ViewText<V>

/** Texts remembered per view: the records read most, a few hundred KB at most. */
const REMEMBERED_VIEWS = 1024

/**
 * `view` as JSON text, remembered per record object. The embedded store's records are immutable
 * (a change replaces the object: docs/storage.md), so a record read again is answered with the
 * same text instead of building and serialising its view again
 * (docs/performance.md "The read by id, 2026-11-28"); cleared when full. Database mode reads a new
 * object each time, so its text is made once per read.
 */
export function rememberedView<R extends object, V>(view: (record: R) => V): (record: R) => ViewText<V> {
  const texts = new Map<R, string>()
  return (record) => {
    let text = texts.get(record)
    if (text === undefined) {
      if (texts.size >= REMEMBERED_VIEWS) texts.clear()
      texts.set(record, (text = JSON.stringify(view(record))))
    }
    return text as ViewText<V>
  }
}

export const timestamps = (r: { created: number; modified: number }) => ({
  created: formatTimestamp(r.created),
  modified: formatTimestamp(r.modified),
})

/** More different values than any honest filter has (docs/security.md). */
export const MAX_FILTER_VALUES = 100
/** Values of one filter as sent, duplicates and blanks included: splitting stops one past this. */
export const MAX_FILTER_VALUES_SENT = 1_000

const distinct = <T>(values: readonly T[]): T[] => [...new Set(values)]

/**
 * A multi-value query filter: repeated (`?ids=a&ids=b`) and comma-separated (`?ids=a,b`) alike;
 * blank values are ignored, so an empty list means no filter. A value sent twice counts once, so
 * the services never do the same work twice. Over MAX_FILTER_VALUES_SENT values, or over
 * MAX_FILTER_VALUES different ones, is a 400, told before any value is checked.
 */
export const multiValue = <S extends v.GenericSchema<string, string>>(item: S, itemForm: Record<string, unknown>) =>
  v.optional(
    v.pipe(
      v.union([v.string(), v.array(v.string())]),
      documentedAs({
        type: 'array',
        items: itemForm,
        // Values as sent count towards maxItems, duplicates included; "different" is said in words.
        maxItems: MAX_FILTER_VALUES_SENT,
        description: `Repeat the parameter or separate values with commas; at most ${MAX_FILTER_VALUES_SENT} values, of which at most ${MAX_FILTER_VALUES} different. Blank values are ignored.`,
      }),
      v.transform((raw): string[] => (Array.isArray(raw) ? raw : [raw]).flatMap((s) => s.split(',', MAX_FILTER_VALUES_SENT + 1))),
      // Checks, not maxLength: JSON Schema would read that as a string's length (/openapi.json).
      v.check((values) => values.length <= MAX_FILTER_VALUES_SENT, `At most ${MAX_FILTER_VALUES_SENT} values`),
      v.transform((values) => distinct(values.map((s) => s.trim()).filter((s) => s.length > 0))),
      v.check((values) => values.length <= MAX_FILTER_VALUES, `At most ${MAX_FILTER_VALUES} different values`),
      v.array(item),
      // Again after the item's normalisation: `A` and `a` name the same id.
      v.transform((values: v.InferOutput<S>[]) => distinct(values)),
    ),
  )

export const UuidList = multiValue(Uuid, { type: 'string', format: 'uuid', pattern: UUID_ANY_CASE.source })

/** The enrollment list's `environment` filter: several names, any of which matches (docs/api.md "Lists and paging"). */
export const EnvironmentFilter = multiValue(EnvironmentName, ENVIRONMENT_NAME_FORM)

/** The message of a value that is none of `values`: `state must be active, revoked or expired`. */
export const mustBeOneOf = (name: string, values: readonly string[]) => `${name} must be ${values.slice(0, -1).join(', ')} or ${values.at(-1)}`

/** A query parameter that takes one of `values`, once (sent twice, as `oneQueryValue` says). */
export const oneQueryChoice = <const T extends readonly [string, ...string[]]>(name: string, values: T) =>
  v.picklist(values, (issue) => (Array.isArray(issue.input) ? `${name} must be given once` : mustBeOneOf(name, values)))

/** A list's `state` filter (docs/api.md "Lists and paging": every list filter takes several values): any of `states`. */
export const StateList = <const S extends readonly [string, ...string[]]>(states: S) =>
  multiValue(v.picklist(states, mustBeOneOf('state', states)), { type: 'string', enum: [...states] })

/** A whole number in a query string, documented as the integer it stands for (with its default). */
const positiveInteger = (max: number, name: string, byDefault?: number) =>
  v.pipe(
    oneQueryValue(name),
    v.regex(/^\d+$/, `${name} must be a whole number`),
    documentedAs({ type: 'integer', minimum: 1, maximum: max, ...(byDefault !== undefined ? { default: byDefault } : {}) }),
    v.transform(Number),
    v.minValue(1, `${name} must be at least 1`),
    v.maxValue(max, `${name} must be at most ${max}`),
  )

/** `page_size` in a query, documented with its default when it has one. */
export const pageSize = (byDefault?: number) => positiveInteger(MAX_PAGE_SIZE, 'page_size', byDefault)

/** Any page a client can count to (past the end: an empty page). */
export const MAX_PAGE = Number.MAX_SAFE_INTEGER
export const MAX_PAGE_SIZE = 1000
export const DEFAULT_PAGE_SIZE = 100

/**
 * page, page_size and order, shared by every paged list. Any page a client can count to is served
 * (past the end: an empty page); the bound only keeps it an exact number.
 */
export const pagingQuery = {
  page: v.optional(positiveInteger(MAX_PAGE, 'page')),
  page_size: v.optional(pageSize(DEFAULT_PAGE_SIZE), String(DEFAULT_PAGE_SIZE)),
  order: v.optional(oneQueryChoice('order', ['asc', 'desc']), 'asc'),
}

// ---------------------------------------------------------------------------------------------
// Answers. Every view is typed by its response schema, so the document cannot promise a shape the
// view does not build; the HTTP tests check every answer against the document besides.

/** Identifiers are answered lowercase (docs/api.md, "Conventions"). */
export const AnsweredUuid = v.pipe(v.string(), v.regex(UUID_LOWERCASE))
export const TraceId = v.pipe(AnsweredUuid, v.description('Equal to the x-trace-id header of the response.'))
export const Timestamp = v.pipe(
  v.string(),
  v.regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6} \+00:00$/),
  v.examples(['2025-01-31 09:15:02.123456 +00:00']),
)
export const AnsweredEnvironmentName = v.pipe(v.string(), v.regex(ENVIRONMENT_NAME))
/** Uppercase names, sorted, comma-separated without spaces. */
export const AnsweredEnvironmentList = v.pipe(v.string(), v.regex(/^[A-Z0-9_-]{1,32}(,[A-Z0-9_-]{1,32})*$/), v.examples(['PROD,TEST']))
export const RecordState = v.picklist(['active', 'suspended'])
export const timestampFields = { created: Timestamp, modified: Timestamp }

const count = v.pipe(v.number(), v.integer(), v.minValue(0))
/** The paged list's counters (consumers, enrollments, the paged installation list). */
export const pageFields = {
  total: v.pipe(count, v.description('All matches, before paging.')),
  page: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_PAGE)),
  page_size: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_PAGE_SIZE)),
}
/** `page` is answered only when the request sent one. */
export const pagedListFields = { ...pageFields, page: v.optional(v.pipe(pageFields.page, v.description('Present only when the request sent `page`.'))) }
