% Pattern: a custom training loop (dlfeval, dlgradient, adamupdate, minibatchqueue,
% trainingProgressMonitor). MATLAB: the loop trains 'net' in place; its architecture stays.
layers = [
    featureInputLayer(8)
    fullyConnectedLayer(32)
    reluLayer
    fullyConnectedLayer(2)
    softmaxLayer];
net = dlnetwork(layers);

numEpochs = 10;
miniBatchSize = 16;
learnRate = 0.01;
mbq = minibatchqueue(ds, MiniBatchSize=miniBatchSize, MiniBatchFormat=["CB" ""]);
monitor = trainingProgressMonitor(Metrics="Loss", Info="Epoch", XLabel="Iteration");
averageGrad = [];
averageSqGrad = [];
iteration = 0;
epoch = 0;
while epoch < numEpochs && ~monitor.Stop
    epoch = epoch + 1;
    shuffle(mbq);
    while hasdata(mbq) && ~monitor.Stop
        iteration = iteration + 1;
        [X, T] = next(mbq);
        [loss, gradients] = dlfeval(@modelLoss, net, X, T);
        [net, averageGrad, averageSqGrad] = adamupdate(net, gradients, ...
            averageGrad, averageSqGrad, iteration, learnRate);
        recordMetrics(monitor, iteration, Loss=loss);
        updateInfo(monitor, Epoch=epoch);
        monitor.Progress = 100 * epoch / numEpochs;
    end
end

function [loss, gradients] = modelLoss(net, X, T)
Y = forward(net, X);
loss = crossentropy(Y, T);
gradients = dlgradient(loss, net.Learnables);
end
