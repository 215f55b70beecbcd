import t from 'tap'
import {
  applySubstitutions,
  expandPattern,
  KNOWN_SEQUENCES,
  patternErrors,
  type SubstitutionContext,
} from '../../../plugins/templates/substitution.js'

// local time on purpose: %Y %m %d %H %M %S read the server's local clock, whatever TZ the tests run in
const date = new Date(2026, 0, 5, 7, 8, 9)
const context: SubstitutionContext = { projectName: 'Trailer', userName: 'alice', date }

t.test('patternErrors: valid patterns', async (t) => {
  for (const pattern of ['', 'plain text', '%n', '%u', '%Y', '%m', '%d', '%H', '%M', '%S', '%%', '%Y-%m-%d %H:%M:%S', '100%% %n', '%%n', '%%%%', 'ü%n€']) {
    t.same(patternErrors(pattern), [], `"${pattern}" is valid`)
  }
  t.same(KNOWN_SEQUENCES, ['%n', '%u', '%Y', '%m', '%d', '%H', '%M', '%S', '%%'], 'the documented sequences and no others')
})

t.test('patternErrors: unknown sequences and a lone %', async (t) => {
  for (const seq of ['x', 'N', 'y', 'D', 'q', ' ', '1', '-', 'é']) {
    const errors = patternErrors(`a%${seq}b`)
    t.equal(errors.length, 1, `%${seq} is one error`)
    t.match(errors[0], `unknown sequence %${seq}`, `%${seq} is named`)
    t.match(errors[0], '%n %u %Y %m %d %H %M %S %%', 'the known sequences are listed')
  }
  t.match(patternErrors('50%'), [/lone %.*%%/], 'a trailing lone % is an error that suggests %%')
  t.match(patternErrors('%'), [/lone %/], 'a pattern of only % is an error')
  t.match(patternErrors('%%%'), [/lone %/], '%% then a lone %')
  t.same(patternErrors('%%x'), [], '%%x is a literal % followed by x')
  t.equal(patternErrors('%a%b%').length, 3, 'every problem is reported, not only the first')
  t.match(patternErrors('%n%q'), [/%q/], 'an unknown sequence after a valid one')
})

t.test('expandPattern: every sequence with a fixed date', async (t) => {
  t.equal(expandPattern('%n', context), 'Trailer')
  t.equal(expandPattern('%u', context), 'alice')
  t.equal(expandPattern('%Y', context), '2026')
  t.equal(expandPattern('%m', context), '01', 'month is 1-based and two digits')
  t.equal(expandPattern('%d', context), '05', 'day is two digits')
  t.equal(expandPattern('%H', context), '07', 'hour is two digits')
  t.equal(expandPattern('%M', context), '08', 'minute is two digits')
  t.equal(expandPattern('%S', context), '09', 'second is two digits')
  t.equal(expandPattern('%%', context), '%')
  t.equal(expandPattern('%Y-%m-%d_%H%M%S %n (%u)', context), '2026-01-05_070809 Trailer (alice)')
  t.equal(expandPattern('', context), '')
  t.equal(expandPattern('no sequences', context), 'no sequences')
  t.equal(expandPattern('%%n', context), '%n', '%%n is a literal %n, not the project name')
  t.equal(expandPattern('100%%', context), '100%')
  const late = new Date(2025, 11, 31, 23, 59, 58)
  t.equal(expandPattern('%Y%m%d%H%M%S', { ...context, date: late }), '20251231235958', 'two-digit values are not padded further')
})

t.test('expandPattern: values are inserted as they are, never expanded again', async (t) => {
  t.equal(expandPattern('%n', { ...context, projectName: '50%n %u %%' }), '50%n %u %%', 'a project name containing sequences stays literal')
  t.equal(expandPattern('%u-%n', { ...context, userName: '$&', projectName: '$1' }), '$&-$1', 'replacement metacharacters are literal')
})

t.test('expandPattern: invalid patterns throw', async (t) => {
  t.throws(() => expandPattern('%q', context), /invalid substitution pattern "%q".*unknown sequence %q/)
  t.throws(() => expandPattern('abc%', context), /lone %/)
  t.throws(() => expandPattern('%\n', context), /unknown sequence/, 'a % before a newline is not silently dropped')
})

t.test('applySubstitutions: replaces every occurrence of every token', async (t) => {
  const patterns = [
    { token: 'PROJECT', pattern: '%n' },
    { token: 'DATE', pattern: '%Y-%m-%d' },
  ]
  t.equal(applySubstitutions('PROJECT_DATE/PROJECT.prproj', patterns, context), 'Trailer_2026-01-05/Trailer.prproj')
  t.equal(applySubstitutions('nothing to do', patterns, context), 'nothing to do')
  t.equal(applySubstitutions('', patterns, context), '')
  t.equal(applySubstitutions('PROJECT', [], context), 'PROJECT', 'no patterns: text unchanged')
  t.equal(applySubstitutions('project', patterns, context), 'project', 'tokens are case-sensitive')
  t.equal(applySubstitutions('a PROJECT b', [{ token: '', pattern: 'x' }], context), 'a PROJECT b', 'an empty token is ignored')
  t.equal(applySubstitutions('AAAA', [{ token: 'AA', pattern: 'b' }], context), 'bb', 'occurrences do not overlap')
})

t.test('applySubstitutions: one pass, a replacement is not substituted again', async (t) => {
  const patterns = [
    { token: 'A', pattern: 'B' },
    { token: 'B', pattern: 'C' },
  ]
  t.equal(applySubstitutions('AB', patterns, context), 'BC', 'A becomes B, and that B is not turned into C')
  t.equal(applySubstitutions('X', [{ token: 'X', pattern: 'XX' }], context), 'XX', 'a replacement containing its own token does not loop')
  t.equal(
    applySubstitutions('NAME', [{ token: 'NAME', pattern: '%n' }], { ...context, projectName: 'NAME-USER' }),
    'NAME-USER',
    'a project name that contains a token stays as it is',
  )
  t.equal(
    applySubstitutions('T', [{ token: 'T', pattern: '%n' }], { ...context, projectName: '%u' }),
    '%u',
    'a project name that looks like a sequence is not expanded',
  )
})

t.test('applySubstitutions: longer tokens win over their prefixes', async (t) => {
  const patterns = [
    { token: 'PRO', pattern: 'short' },
    { token: 'PROJECT', pattern: 'long' },
    { token: 'PROJECT_NAME', pattern: 'longest' },
  ]
  t.equal(applySubstitutions('PROJECT_NAME PROJECT PRO', patterns, context), 'longest long short')
  t.equal(applySubstitutions('PROJECT_NAME PROJECT PRO', [...patterns].reverse(), context), 'longest long short', 'the order of the list does not matter')
})

t.test('applySubstitutions: regex metacharacters in tokens are literal', async (t) => {
  for (const token of ['.', '*', '+', '?', '^', '$', '{1}', '(x)', '|', '[a-z]', '\\', 'a.b', '$&', '\\d+', '/']) {
    t.equal(applySubstitutions(`x${token}y aby`, [{ token, pattern: '%n' }], context), 'xTrailery aby', `token ${JSON.stringify(token)}`)
  }
  t.equal(applySubstitutions('{{name}} {{name}}', [{ token: '{{name}}', pattern: '%n %%' }], context), 'Trailer % Trailer %')
  t.equal(applySubstitutions('a.b', [{ token: '.', pattern: '$&$1' }], context), 'a$&$1b', 'replacement metacharacters are literal')
})

t.test('applySubstitutions: an invalid pattern throws instead of writing garbage', async (t) => {
  t.throws(() => applySubstitutions('TOKEN', [{ token: 'TOKEN', pattern: '%z' }], context), /unknown sequence %z/)
})
