package dev.sluice.catalog;

import java.net.InetSocketAddress;

import org.apache.hadoop.hive.common.LogUtils;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.RetryingHMSHandler;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.TProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

/**
 * Hive 2.3's metastore server (the one PySpark's jars ship) on one address: {@code BoundMetastore HOST PORT}.
 *
 * <p>{@code HiveMetaStore.main} listens on every interface of the host and has no setting for its address (Hive
 * 2.3's {@code startMetaStore} hands {@code null} for the host to {@code HiveAuthUtils.getServerSocket}). This is
 * the same server -- the same handler, retried as Hive retries it, the same Thrift transport, protocol and
 * worker threads as {@code startMetaStore} builds them without SASL or SSL -- on the address given: 127.0.0.1 for
 * sluice's local catalog, every interface (0.0.0.0) in a container whose neighbours reach it.
 */
public final class BoundMetastore {
    private BoundMetastore() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: BoundMetastore HOST PORT");
            System.exit(2);
        }
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        try {
            LogUtils.initHiveLog4j();  // hive-log4j2.properties: the log in hive.log.dir / hive.log.file
        } catch (LogUtils.LogInitializationException e) {
            System.err.println("BoundMetastore: logging not set up: " + e.getMessage());
        }
        HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
        long maxMessageSize = conf.getLongVar(HiveConf.ConfVars.METASTORESERVERMAXMESSAGESIZE);
        // the handler's init (its database, Hive's default schema) runs here, before the port opens
        IHMSHandler handler = RetryingHMSHandler.getProxy(conf,
                new HiveMetaStore.HMSHandler("new db based metaserver", conf, false), false);
        TProcessor processor;
        TTransportFactory transports;
        if (conf.getBoolVar(HiveConf.ConfVars.METASTORE_EXECUTE_SET_UGI)) {
            processor = new TUGIBasedProcessor<IHMSHandler>(handler);
            transports = new TUGIContainingTransport.Factory();
        } else {
            processor = new TSetIpAddressProcessor<IHMSHandler>(handler);
            transports = new TTransportFactory();
        }
        TServerSocket socket = new TServerSocket(new InetSocketAddress(host, port));
        TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket)
                .processor(processor)
                .transportFactory(transports)
                .protocolFactory(new TBinaryProtocol.Factory())
                .inputProtocolFactory(new TBinaryProtocol.Factory(true, true, maxMessageSize, maxMessageSize))
                .minWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMINTHREADS))
                .maxWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMAXTHREADS));
        System.err.println("BoundMetastore: serving on " + host + ":" + port);
        new TThreadPoolServer(serverArgs).serve();
    }
}
