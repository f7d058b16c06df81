# Ruby Dalli (Debian's ruby-dalli, binary protocol) through shoal-proxy.
#
# Usage: ruby dalli_proxy.rb PLAIN_PORT SASL_PORT [POOL_NAME]
#   PLAIN_PORT: a pool over several servers without authentication (a server pool, or a
#               route pool over one);
#   SASL_PORT:  a pool whose `sasl:` section has the user alice:wonderland;
#   POOL_NAME:  the name of PLAIN_PORT's pool, as STAT reports it (default: plain).
# Exits non-zero (with the failed check) on the first mismatch. Run by
# crates/shoal-proxy/tests/dalli.rs.

require 'dalli'
require 'logger'

Dalli.logger = Logger.new($stderr)
Dalli.logger.level = Logger::WARN

$checks = 0

def check(what, got, want)
  $checks += 1
  return if got == want

  warn "FAILED: #{what}: got #{got.inspect}, want #{want.inspect}"
  exit 1
end

def check_raises(what, error)
  yield
  warn "FAILED: #{what}: no #{error} raised"
  exit 1
rescue error
  $checks += 1
end

plain_port, sasl_port = ARGV.first(2).map(&:to_i)
pool_name = ARGV[2] || 'plain'
opts = { socket_timeout: 5, socket_max_failures: 1, down_retry_delay: 0.1 }
dc = Dalli::Client.new("127.0.0.1:#{plain_port}", opts)

check('flush', dc.flush.all? { |r| r }, true)
check('version', dc.version.values.first.to_s.include?('shoal-proxy'), true)

# Plain values (marshalled) and raw values.
check('set', dc.set('k', { 'a' => [1, 2, 3] }).nil?, false)
check('get', dc.get('k'), { 'a' => [1, 2, 3] })
check('get miss', dc.get('missing'), nil)
blob = (0..255).map(&:chr).join * 1000
dc.set('blob', blob, 0, raw: true)
check('raw blob', dc.get('blob', raw: true).bytes, blob.bytes)

# add / replace / append / prepend / delete.
check('add existing', dc.add('k', 'x'), false)
check('add new', !!dc.add('new', '1', 0, raw: true), true)
# Dalli answers a replace of a missing key with the reply's CAS (0), as from memcached.
check('replace missing', [false, 0].include?(dc.replace('nope', 'x')), true)
check('replace missing stored nothing', dc.get('nope'), nil)
check('replace', !!dc.replace('new', '2', 0, raw: true), true)
check('append', !!dc.append('new', 'post'), true)
check('prepend', !!dc.prepend('new', 'pre'), true)
check('after append/prepend', dc.get('new', raw: true), 'pre2post')
check('delete', dc.delete('new'), true)
check('delete missing', dc.delete('new'), nil)

# Counters.
check('incr creates', dc.incr('ctr', 5, 0, 10), 10)
check('incr', dc.incr('ctr', 5), 15)
check('decr', dc.decr('ctr', 20), 0)
check('incr missing without default', dc.incr('nothing', 1), nil)

# CAS.
dc.set('c', 'one', 0, raw: true)
value, cas = dc.get_cas('c')
check('get_cas', value, 'one')
check('set_cas', !!dc.set_cas('c', 'two', cas, 0, raw: true), true)
check('stale set_cas', dc.set_cas('c', 'three', cas, 0, raw: true), false)
check('cas block', dc.cas('c', 0, raw: true) { |v| v + '!' } ? true : false, true)
check('after cas', dc.get('c', raw: true), 'two!')

# Touch and get-and-touch.
check('touch', dc.touch('c', 100), true)
check('touch missing', dc.touch('nope', 100), nil)
check('gat', dc.gat('c', 100), 'two!')

# Multi-get over every server: Dalli batches GETKQ ... NOOP per server it knows (one,
# the proxy), which the proxy splits over its servers.
values = (0...300).to_h { |i| ["key#{i}", "value#{i}"] }
values.each { |k, v| dc.set(k, v, 0, raw: true) }
keys = values.keys + (0...50).map { |i| "absent#{i}" }
check('get_multi', dc.get_multi(keys, raw: true), values)
# Dalli's multi block sends quiet commands (SETQ, DELETEQ) ended by a NOOP.
dc.multi { values.each { |k, v| dc.set(k, v + '!', 0, raw: true) } }
bang = values.transform_values { |v| v + '!' }
check('quiet sets then get_multi', dc.get_multi(values.keys, raw: true), bang)
dc.multi { values.keys.first(100).each { |k| dc.delete(k) } }
check('quiet deletes', dc.get_multi(values.keys, raw: true), bang.drop(100).to_h)

# Stats: the proxy's own.
stats = dc.stats.values.first
check('stats pool', stats['pool'], pool_name)
check('stats pid', stats['pid'].to_i > 0, true)
dc.close

# SASL at the proxy.
ok = Dalli::Client.new("127.0.0.1:#{sasl_port}", opts.merge(username: 'alice', password: 'wonderland'))
check('sasl set', ok.set('private', 'data', 0, raw: true).nil?, false)
check('sasl get', ok.get('private', raw: true), 'data')
check('sasl get_multi', ok.get_multi(%w[private nothing], raw: true), { 'private' => 'data' })
ok.close
bad = Dalli::Client.new("127.0.0.1:#{sasl_port}", opts.merge(username: 'alice', password: 'guess'))
check_raises('wrong password', Dalli::DalliError) { bad.get('private') }
bad.close
anon = Dalli::Client.new("127.0.0.1:#{sasl_port}", opts)
check_raises('no credentials', Dalli::DalliError) { anon.get('private') }
anon.close

puts "dalli #{Dalli::VERSION}: #{$checks} checks passed"
